#include "opencl/tuning_cache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/atomic_file.h"
#include "common/error.h"

namespace lenet5 {
namespace {

constexpr const char* kHeader =
    "# lenet5 tune: the fastest work-group size per sample (group) and knob settings for each device, driver, variant,\n"
    "# batch and model\n"
    "# platform\tdevice\tdriver\tvariant\tbatch\tgroup\tus_per_step\tmodel\tknobs\n";

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> fields;
    std::string field;
    std::istringstream in(line);
    while (std::getline(in, field, '\t')) fields.push_back(field);
    if (!line.empty() && line.back() == '\t') fields.emplace_back();
    return fields;
}

// A positive whole number, or -1.
long parse_positive(const std::string& text) {
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    return !text.empty() && *end == '\0' && v > 0 ? v : -1;
}

// "" or NAME=DIGITS[,NAME=DIGITS...], NAME of capitals and underscores: knob settings, nothing else
// (the engine passes them to the OpenCL compiler as -D options).
bool knobs_well_formed(const std::string& knobs) {
    if (knobs.empty()) return true;
    std::istringstream in(knobs);
    for (std::string item; std::getline(in, item, ',');) {
        const size_t eq = item.find('=');
        if (eq == 0 || eq == std::string::npos || eq + 1 == item.size()) return false;
        for (size_t i = 0; i < item.size(); ++i) {
            const char c = item[i];
            const bool ok = i < eq ? (c >= 'A' && c <= 'Z') || c == '_' : i == eq || (c >= '0' && c <= '9');
            if (!ok) return false;
        }
    }
    return knobs.back() != ',';
}

}  // namespace

std::string default_tuning_path() {
    if (const char* p = std::getenv("LENET5_TUNING"); p && *p) return p;
    if (const char* p = std::getenv("XDG_CACHE_HOME"); p && *p) return std::string(p) + "/lenet5/tuning.tsv";
    if (const char* p = std::getenv("HOME"); p && *p) return std::string(p) + "/.cache/lenet5/tuning.tsv";
    return "";
}

std::vector<std::pair<int, std::vector<std::string>>> read_tsv_lines(const std::string& path, const std::string& what) {
    std::ifstream in(path);
    if (!in) {
        if (!std::filesystem::exists(path)) return {};
        throw Error("cannot read the " + what + " " + path);
    }
    std::vector<std::pair<int, std::vector<std::string>>> lines;
    int number = 0;
    for (std::string line; std::getline(in, line);) {
        ++number;
        if (!line.empty() && line[0] != '#') lines.emplace_back(number, split_tabs(line));
    }
    return lines;
}

void check_cache_fields(std::initializer_list<const std::string*> fields, const std::string& what) {
    for (const std::string* s : fields)
        if (s->find_first_of("\t\n\r") != std::string::npos)
            throw Error("cannot store '" + *s + "' in the " + what + ": it has a tab or newline");
}

void write_cache_file(const std::string& path, const std::string& contents) {
    const std::filesystem::path folder = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!folder.empty()) std::filesystem::create_directories(folder, ec);
    if (ec) throw Error("cannot create the folder " + folder.string() + " for the tuning cache: " + ec.message());
    write_file_atomic(path, contents);
}

std::vector<TuningEntry> read_tuning(const std::string& path) {
    std::vector<TuningEntry> entries;
    for (const auto& [number, f] : read_tsv_lines(path, "tuning cache")) {
        const std::string where = "tuning cache " + path + " line " + std::to_string(number) + ": ";
        if (f.size() < 7 || f.size() > 9)
            throw Error(where + "expected 9 tab-separated fields, found " + std::to_string(f.size()));
        TuningEntry e{{f[0], f[1], f[2], f[3], static_cast<int>(parse_positive(f[4])), f.size() >= 8 ? f[7] : "lenet5"},
                      static_cast<int>(parse_positive(f[5])), std::strtod(f[6].c_str(), nullptr),
                      f.size() == 9 ? f[8] : ""};
        if (e.key.model.empty()) throw Error(where + "the model is empty");
        if (e.key.batch <= 0) throw Error(where + "the batch '" + f[4] + "' is not a positive whole number");
        if (e.group <= 0 || (e.group & (e.group - 1)))
            throw Error(where + "the group '" + f[5] + "' is not a power of two");
        if (!knobs_well_formed(e.knobs))
            throw Error(where + "the knobs '" + e.knobs + "' are not NAME=VALUE,...");
        entries.push_back(std::move(e));
    }
    return entries;
}

void store_tuning(const std::string& path, const TuningEntry& entry) {
    const TuningKey& k = entry.key;
    check_cache_fields({&k.platform, &k.device, &k.driver, &k.variant, &k.model, &entry.knobs}, "tuning cache");
    std::vector<TuningEntry> entries = read_tuning(path);
    replace_or_append(entries, entry, [](const TuningEntry& a, const TuningEntry& b) { return a.key == b.key; });
    std::ostringstream out;
    out << kHeader;
    for (const auto& e : entries)
        out << e.key.platform << '\t' << e.key.device << '\t' << e.key.driver << '\t' << e.key.variant << '\t'
            << e.key.batch << '\t' << e.group << '\t' << e.us_per_step << '\t' << e.key.model << '\t' << e.knobs << '\n';
    write_cache_file(path, out.str());
}

std::optional<TuningEntry> find_tuning(const std::vector<TuningEntry>& entries, const TuningKey& key) {
    for (const auto& e : entries)
        if (e.key == key) return e;
    return std::nullopt;
}

}  // namespace lenet5
