#include "conv/conv_tuning.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "common/error.h"
#include "opencl/tuning_cache.h"

namespace lenet5::conv {
namespace {

constexpr const char* kHeader =
    "# lenet5 tune --conv: the fastest convolution algorithm per device, driver and shape\n"
    "# platform\tdevice\tdriver\tshape\talgo\tms\n";

bool same_key(const ConvTuningEntry& a, const ConvTuningEntry& b) {
    return a.platform == b.platform && a.device == b.device && a.driver == b.driver && a.shape == b.shape;
}

}  // namespace

std::string default_conv_tuning_path() {
    if (const char* p = std::getenv("LENET5_CONV_TUNING"); p && *p) return p;
    const std::string work_groups = default_tuning_path();
    if (work_groups.empty()) return "";
    return (std::filesystem::path(work_groups).parent_path() / "conv-tuning.tsv").string();
}

std::vector<ConvTuningEntry> read_conv_tuning(const std::string& path) {
    std::vector<ConvTuningEntry> entries;
    for (const auto& [number, f] : read_tsv_lines(path, "convolution tuning cache")) {
        const std::string where = "convolution tuning cache " + path + " line " + std::to_string(number) + ": ";
        if (f.size() != 6) throw Error(where + "expected 6 tab-separated fields, found " + std::to_string(f.size()));
        ConvTuningEntry e{f[0], f[1], f[2], f[3], ConvAlgo::Direct, std::strtod(f[5].c_str(), nullptr)};
        try {
            e.algo = parse_algo(f[4]);
        } catch (const UsageError& bad) {
            throw Error(where + bad.what());
        }
        if (e.algo == ConvAlgo::Auto) throw Error(where + "the algorithm must be direct, im2col, winograd, clblast or own");
        entries.push_back(std::move(e));
    }
    return entries;
}

std::map<std::string, ConvAlgo> tuned_conv_algos(const std::string& platform, const std::string& device,
                                                 const std::string& driver) {
    std::map<std::string, ConvAlgo> tuned;
    const std::string path = default_conv_tuning_path();
    try {
        if (!path.empty())
            for (const ConvTuningEntry& e : read_conv_tuning(path))
                if (e.platform == platform && e.device == device && e.driver == driver && algo_built(e.algo))
                    tuned[e.shape] = e.algo;
    } catch (const Error& e) {  // as for the work-group cache: a broken cache costs the tuning, not the run
        std::cerr << "lenet5: warning: " << e.what() << "; using the default convolution algorithms\n";
        tuned.clear();
    }
    return tuned;
}

void store_conv_tuning(const std::string& path, const ConvTuningEntry& entry) {
    check_cache_fields({&entry.platform, &entry.device, &entry.driver, &entry.shape}, "convolution tuning cache");
    std::vector<ConvTuningEntry> entries = read_conv_tuning(path);
    replace_or_append(entries, entry, same_key);
    std::ostringstream out;
    out << kHeader;
    for (const auto& e : entries)
        out << e.platform << '\t' << e.device << '\t' << e.driver << '\t' << e.shape << '\t' << algo_name(e.algo) << '\t'
            << e.ms << '\n';
    write_cache_file(path, out.str());
}

}  // namespace lenet5::conv
