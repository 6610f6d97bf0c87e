// The autotuner's cache (tuning_cache.h) and its use by the OpenCL variants.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>

#include "engine/engine_factory.h"
#include "common/error.h"
#include "opencl/tuning_cache.h"
#ifdef LENET5_HAVE_OPENCL
#include "opencl/opencl_runtime.h"
#endif

using namespace lenet5;

namespace {

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "lenet5_tuning_" + name; }

TuningEntry entry(const std::string& variant, int batch, int group) {
    return {{"Some Platform", "Some Device", "1.2.3", variant, batch}, group, 12.5};
}

// The tuned group for `key`, if the entries have one.
std::optional<int> find_tuned_group(const std::vector<TuningEntry>& entries, const TuningKey& key) {
    const auto e = find_tuning(entries, key);
    return e ? std::optional<int>(e->group) : std::nullopt;
}

void expect_error_mentions(const std::string& path, const std::string& mentions) {
    try {
        read_tuning(path);
        FAIL() << "no error for " << path;
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
    }
}

}  // namespace

TEST(TuningCache, StoresReplacesAndFindsByTheWholeKey) {
    const std::string path = temp_path("cache/sub/tuning.tsv");  // the folders are created
    std::remove(path.c_str());
    EXPECT_TRUE(read_tuning(path).empty());
    store_tuning(path, entry("gpu-local", 64, 256));
    store_tuning(path, entry("gpu", 64, 128));
    store_tuning(path, entry("gpu-local", 256, 512));
    store_tuning(path, entry("gpu-local", 64, 1024));  // replaces the first
    const auto entries = read_tuning(path);
    ASSERT_EQ(entries.size(), 3u);
    EXPECT_EQ(find_tuned_group(entries, entry("gpu-local", 64, 0).key), 1024);
    EXPECT_EQ(find_tuned_group(entries, entry("gpu", 64, 0).key), 128);
    EXPECT_EQ(find_tuned_group(entries, entry("gpu-local", 256, 0).key), 512);
    EXPECT_FALSE(find_tuned_group(entries, entry("gpu-constant", 64, 0).key));
    TuningKey other_driver = entry("gpu-local", 64, 0).key;
    other_driver.driver = "1.2.4";
    EXPECT_FALSE(find_tuned_group(entries, other_driver));
    EXPECT_DOUBLE_EQ(entries[0].us_per_step, 12.5);
    TuningKey other_model = entry("gpu-local", 64, 0).key;
    other_model.model = "mlp";
    EXPECT_FALSE(find_tuned_group(entries, other_model));
    store_tuning(path, {other_model, 32, 3.0});
    EXPECT_EQ(find_tuned_group(read_tuning(path), other_model), 32);
    EXPECT_EQ(find_tuned_group(read_tuning(path), entry("gpu-local", 64, 0).key), 1024);
}

// A cache written before models existed has 7 fields per line: LeNet-5's.
TEST(TuningCache, SevenFieldLinesAreLenet5s) {
    const std::string path = temp_path("old.tsv");
    std::ofstream(path) << "Some Platform\tSome Device\t1.2.3\tgpu\t64\t256\t3.5\n";
    const auto entries = read_tuning(path);
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].key.model, "lenet5");
    EXPECT_EQ(find_tuned_group(entries, entry("gpu", 64, 0).key), 256);
}

// The knob settings tune chose come back with the group; a line of 8 fields (before knobs were
// tuned) has the kernels' defaults.
TEST(TuningCache, KeepsTheKnobSettings) {
    const std::string path = temp_path("knobs.tsv");
    std::remove(path.c_str());
    TuningEntry e = entry("gpu-local", 64, 1024);
    e.knobs = "FWD_RUN=4,FC_LANES=8";
    store_tuning(path, e);
    store_tuning(path, entry("gpu", 64, 512));
    const auto entries = read_tuning(path);
    EXPECT_EQ(find_tuning(entries, e.key)->knobs, "FWD_RUN=4,FC_LANES=8");
    EXPECT_EQ(find_tuning(entries, entry("gpu", 64, 0).key)->knobs, "");
    std::ofstream(path) << "P\tD\t1\tgpu\t64\t256\t3.5\tlenet5\n";
    EXPECT_EQ(read_tuning(path).at(0).knobs, "");
}

TEST(TuningCache, MalformedLinesNameTheFileAndLine) {
    const std::string path = temp_path("bad.tsv");
    auto write = [&](const std::string& text) { std::ofstream(path) << text; };
    write("# comment\nP\tD\t1\tgpu\t64\t256\t3.5\nP\tD\t1\tgpu\t64\n");
    expect_error_mentions(path, "line 3: expected 9 tab-separated fields, found 5");
    write("P\tD\t1\tgpu\t64\t256\t3.5\tlenet5\t-DX=1 -cl-fast-relaxed-math\n");
    expect_error_mentions(path, "line 1: the knobs '-DX=1 -cl-fast-relaxed-math' are not NAME=VALUE,...");
    for (const char* bad : {"FC_LANES=", "=8", "FC_LANES=8,", "FC_LANES=8,,BWD_RUN=4", "fc_lanes=8", "FC_LANES=8x"}) {
        write(std::string("P\tD\t1\tgpu\t64\t256\t3.5\tlenet5\t") + bad + "\n");
        expect_error_mentions(path, std::string("the knobs '") + bad + "'");
    }
    write("P\tD\t1\tgpu\t64\t256\t3.5\tlenet5\tFC_LANES=8,BWD_RUN=4\n");
    EXPECT_EQ(read_tuning(path).at(0).knobs, "FC_LANES=8,BWD_RUN=4");
    write("P\tD\t1\tgpu\t64\t300\t3.5\n");
    expect_error_mentions(path, "line 1: the group '300' is not a power of two");
    write("P\tD\t1\tgpu\tmany\t256\t3.5\n");
    expect_error_mentions(path, "the batch 'many' is not a positive whole number");
    TuningEntry tabbed = entry("gpu", 64, 256);
    tabbed.key.device = "a\tb";
    EXPECT_THROW(store_tuning(temp_path("tabbed.tsv"), tabbed), Error);
}

#ifdef LENET5_HAVE_OPENCL
// train passes its batch: the tuned group for that batch applies, another batch gets the default,
// and an explicit --group wins over the cache.
TEST(TuningCache, TheOpenCLVariantsUseTheTunedGroupForTheBatch) {
    const std::string path = temp_path("engine.tsv");
    std::remove(path.c_str());
    const OpenCLDevice d = select_opencl_device(-1);
    store_tuning(path, {{d.platform_name, d.name, d.driver, "gpu-local", 8}, 64, 1.0});
    ASSERT_EQ(setenv("LENET5_TUNING", path.c_str(), 1), 0);
    EngineRequest request;
    request.variant = "gpu-local";
    request.batch = 8;
    EXPECT_NE(make_engine(lenet5_network(), request)->device().find("(64 items per sample, tuned)"), std::string::npos);
    request.group = 32;
    EXPECT_NE(make_engine(lenet5_network(), request)->device().find("(32 items per sample, --group)"), std::string::npos);
    request.group = 0;
    request.batch = 9;
    EXPECT_EQ(make_engine(lenet5_network(), request)->device().find("tuned"), std::string::npos);
    // The knob settings tuned with the group apply with it.
    store_tuning(path, {{d.platform_name, d.name, d.driver, "gpu-local", 8}, 64, 1.0, "FC_LANES=8"});
    request.batch = 8;
    EXPECT_NE(make_engine(lenet5_network(), request)->device().find("(64 items per sample, tuned, FC_LANES=8)"),
              std::string::npos);
    // A broken cache costs the tuning, not the run: a knob the kernels do not have, a malformed line.
    store_tuning(path, {{d.platform_name, d.name, d.driver, "gpu-local", 8}, 64, 1.0, "NO_SUCH_KNOB=1"});
    EXPECT_NE(make_engine(lenet5_network(), request)->device().find("default)"), std::string::npos);
    std::ofstream(path) << "not a cache\n";
    EXPECT_NE(make_engine(lenet5_network(), request)->device().find("default)"), std::string::npos);
    unsetenv("LENET5_TUNING");
}
#endif
