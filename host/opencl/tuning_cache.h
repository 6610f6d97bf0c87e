// The autotuner's cache (`lenet5 tune` writes it, the OpenCL variants read it): the fastest
// work-group size per sample measured for a device, driver, variant, batch size and model. A
// text file of tab-separated lines, one per key:
//   platform <TAB> device <TAB> driver <TAB> variant <TAB> batch <TAB> group <TAB> us_per_step <TAB> model <TAB> knobs
// Lines starting with '#' are comments. A line without the model (the format before models
// existed) is LeNet-5's; one without knobs (before they were tuned) has the kernels' defaults.
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lenet5 {

struct TuningKey {
    std::string platform, device, driver, variant;
    int batch = 0;
    std::string model = "lenet5";  // the network's name
    bool operator==(const TuningKey& o) const {
        return platform == o.platform && device == o.device && driver == o.driver && variant == o.variant &&
               batch == o.batch && model == o.model;
    }
};

struct TuningEntry {
    TuningKey key;
    int group = 0;             // items per sample's work-group
    double us_per_step = 0.0;  // what it measured, for the reader
    std::string knobs = "";    // the per-sample kernels' knob settings, "NAME=V,NAME=V" ("": the defaults)
};

// $LENET5_TUNING, else $XDG_CACHE_HOME/lenet5/tuning.tsv, else $HOME/.cache/lenet5/tuning.tsv;
// empty when none of them is set.
std::string default_tuning_path();

// The entries of the file at `path`; none when it does not exist. Throws Error naming the path
// and line when a line is malformed.
std::vector<TuningEntry> read_tuning(const std::string& path);

// Adds `entry` to the file at `path`, replacing the entry with the same key; creates the folder.
// Written atomically (atomic_file.h).
void store_tuning(const std::string& path, const TuningEntry& entry);

// The caches' common parts. The lines of the tab-separated file at `path` that are neither empty
// nor '#' comments, each with its line number; none when the file does not exist. Throws Error
// naming `what` and the path when it cannot be read.
std::vector<std::pair<int, std::vector<std::string>>> read_tsv_lines(const std::string& path, const std::string& what);
// Writes `contents` to `path` atomically (atomic_file.h), creating its folder.
void write_cache_file(const std::string& path, const std::string& contents);
// Throws Error when one of `fields` has a tab or newline (it would break the file's lines); `what`
// names the cache.
void check_cache_fields(std::initializer_list<const std::string*> fields, const std::string& what);
// Replaces the entries with `entry`'s key (`same_key(e, entry)`) by `entry`, or appends it when none has.
template <class Entry, class SameKey>
void replace_or_append(std::vector<Entry>& entries, const Entry& entry, SameKey same_key) {
    bool replaced = false;
    for (auto& e : entries)
        if (same_key(e, entry)) {
            e = entry;
            replaced = true;
        }
    if (!replaced) entries.push_back(entry);
}

// The entry for `key`, if the entries have one.
std::optional<TuningEntry> find_tuning(const std::vector<TuningEntry>& entries, const TuningKey& key);

}  // namespace lenet5
