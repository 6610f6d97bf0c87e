#include "opencl/opencl_kernels.h"

#include <sys/stat.h>

#include <cctype>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sstream>

#include "common/error.h"
#include "io/read_whole_file.h"

namespace lenet5 {
namespace {

// The files in use: `label` is what a #line directive names (the folder file's path, or the
// embedded file's name).
struct KernelSet {
    std::string folder;
    std::vector<KernelFile> files;
    std::vector<std::string> labels;
};

std::mutex g_mutex;
std::shared_ptr<const KernelSet> g_folder_set;  // null: the embedded files

std::shared_ptr<const KernelSet> embedded_set() {
    static const auto set = [] {
        auto s = std::make_shared<KernelSet>();
        s->files = embedded_kernel_files();
        for (const auto& f : s->files) s->labels.push_back(f.name);
        return s;
    }();
    return set;
}

std::shared_ptr<const KernelSet> active_set() {
    const std::lock_guard<std::mutex> lock(g_mutex);
    return g_folder_set ? g_folder_set : embedded_set();
}

// What begins each file in a program's source.
constexpr const char* kFileMarker = "#line 1 \"";

std::string with_line_marker(const std::string& label, const std::string& text) {
    return kFileMarker + label + "\"\n" + text + "\n";
}

std::string folder_path(const std::string& dir, const std::string& name) {
    return (std::filesystem::path(dir) / name).string();
}

// Moves `at` past spaces and tabs.
void skip_blanks(const std::string& s, size_t& at) {
    while (at < s.size() && (s[at] == ' ' || s[at] == '\t')) ++at;
}

// Whether `s` continues at `at` with `word` (then moves past it).
bool take(const std::string& s, size_t& at, const std::string& word) {
    if (s.compare(at, word.size(), word) != 0) return false;
    at += word.size();
    return true;
}

// `#line N "FILE"`: N and FILE.
bool line_directive(const std::string& line, int& number, std::string& file) {
    size_t at = 0;
    if (!take(line, at, "#line")) return false;
    const size_t digits = at;
    skip_blanks(line, at);
    if (at == digits) return false;
    const size_t first = at;
    while (at < line.size() && std::isdigit(static_cast<unsigned char>(line[at]))) ++at;
    if (at == first || at - first > 9) return false;
    number = std::stoi(line.substr(first, at - first));
    skip_blanks(line, at);
    const size_t close = at < line.size() && line[at] == '"' ? line.find('"', at + 1) : std::string::npos;
    if (close == std::string::npos) return false;
    file = line.substr(at + 1, close - at - 1);
    return true;
}

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether `line` defines `function`: `void NAME(` (after __kernel and its attributes), or a macro
// that defines it, `MACRO(NAME, ...)` at the start of the line.
bool defines(const std::string& line, const std::string& function) {
    for (size_t v = line.find("void"); v != std::string::npos; v = line.find("void", v + 1)) {
        if (v > 0 && is_identifier_char(line[v - 1])) continue;
        size_t at = v + 4;
        const size_t name = at;
        skip_blanks(line, at);
        if (at == name || !take(line, at, function)) continue;
        skip_blanks(line, at);
        if (at < line.size() && line[at] == '(') return true;
    }
    size_t at = 0;
    skip_blanks(line, at);
    const size_t macro = at;
    while (at < line.size() && (std::isupper(static_cast<unsigned char>(line[at])) || line[at] == '_' ||
                                (at > macro && std::isdigit(static_cast<unsigned char>(line[at])))))
        ++at;
    if (at == macro || !take(line, at, "(") || !take(line, at, function)) return false;
    skip_blanks(line, at);
    return at < line.size() && line[at] == ',';
}

}  // namespace

std::vector<KernelFile> read_kernel_folder(const std::string& dir) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) throw Error("kernel folder " + dir + ": no such folder");
    if (!S_ISDIR(st.st_mode)) throw Error("kernel folder " + dir + ": not a folder");
    std::vector<KernelFile> files;
    for (const auto& embedded : embedded_kernel_files()) {
        const std::string path = folder_path(dir, embedded.name);
        if (::stat(path.c_str(), &st) != 0)
            throw Error("kernel folder " + dir + " has no " + embedded.name +
                        " (every kernel file is needed; `lenet5 kernels --dump DIR` writes them all)");
        files.push_back({embedded.name, read_whole_file(path, kMaxKernelFileBytes)});
    }
    return files;
}

void use_kernel_folder(const std::string& dir) {
    std::shared_ptr<const KernelSet> set;
    if (!dir.empty()) {
        auto s = std::make_shared<KernelSet>();
        s->folder = dir;
        s->files = read_kernel_folder(dir);
        for (const auto& f : s->files) s->labels.push_back(folder_path(dir, f.name));
        set = std::move(s);
    }
    const std::lock_guard<std::mutex> lock(g_mutex);
    g_folder_set = std::move(set);
}

std::string use_requested_kernels(const std::string& flag) {
    const std::string dir = requested_kernel_folder(flag);
    if (dir.empty()) return "";
    use_kernel_folder(dir);
    return "lenet5: OpenCL kernels from " + dir + " (not the embedded copies)\n";
}

std::string kernel_folder() { return active_set()->folder; }

std::string opencl_kernel_source() {
    const auto set = active_set();
    std::string all;
    for (size_t i = 0; i < set->files.size(); ++i)
        if (set->files[i].name.rfind("layers/", 0) != 0) all += with_line_marker(set->labels[i], set->files[i].text);
    return all;
}

std::string opencl_kernel_file(const std::string& name) {
    const auto set = active_set();
    for (size_t i = 0; i < set->files.size(); ++i)
        if (set->files[i].name == name) return with_line_marker(set->labels[i], set->files[i].text);
    throw Error("there is no OpenCL kernel file " + name);
}

std::string host_written_prefix(const std::string& source) { return source.substr(0, source.find(kFileMarker)); }

std::string log_with_file_lines(const std::string& source, const std::string& log) {
    // Each line of the program: the file and line its nearest #line directive above makes it.
    std::vector<std::string> where;
    std::string label = "<kernel>";
    int number = 0;
    std::istringstream lines(source);
    for (std::string line; std::getline(lines, line);) {
        where.push_back(label + ":" + std::to_string(++number));
        int next = 0;
        std::string file;
        if (line_directive(line, next, file)) {
            label = file;
            number = next - 1;
        }
    }
    const std::string tag = "<kernel>:";
    std::string out;
    size_t from = 0;
    for (size_t at = log.find(tag); at != std::string::npos; at = log.find(tag, from)) {
        const size_t digits = at + tag.size();
        size_t stop = digits;
        while (stop < log.size() && std::isdigit(static_cast<unsigned char>(log[stop]))) ++stop;
        out.append(log, from, at - from);
        const size_t line = stop > digits && stop - digits < 10 ? std::stoul(log.substr(digits, stop - digits)) : 0;
        if (stop < log.size() && log[stop] == ':' && line >= 1 && line <= where.size())
            out += where[line - 1];
        else
            out.append(log, at, stop - at);
        from = stop;
    }
    return out.append(log, from, std::string::npos);
}

std::string kernel_definition(const std::string& function) {
    for (const auto& f : active_set()->files) {
        std::istringstream lines(f.text);
        int number = 0;
        for (std::string line; std::getline(lines, line);) {
            ++number;
            if (defines(line, function)) return f.name + ":" + std::to_string(number);
        }
    }
    return "";
}

}  // namespace lenet5
