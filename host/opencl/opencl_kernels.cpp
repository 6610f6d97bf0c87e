#include "opencl/opencl_kernels.h"

#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <regex>
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

std::string with_line_marker(const std::string& label, const std::string& text) {
    return "#line 1 \"" + label + "\"\n" + text + "\n";
}

std::string folder_path(const std::string& dir, const std::string& name) {
    return (std::filesystem::path(dir) / name).string();
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
    for (size_t i = 0; i < set->files.size(); ++i) all += with_line_marker(set->labels[i], set->files[i].text);
    return all;
}

std::string opencl_kernel_file(const std::string& name) {
    const auto set = active_set();
    for (size_t i = 0; i < set->files.size(); ++i)
        if (set->files[i].name == name) return with_line_marker(set->labels[i], set->files[i].text);
    throw Error("there is no OpenCL kernel file " + name);
}

std::string log_with_file_lines(const std::string& source, const std::string& log) {
    // Each line of the program: the file and line its nearest #line directive above makes it.
    std::vector<std::string> where;
    std::string label = "<kernel>";
    int number = 0;
    const std::regex directive("^#line\\s+(\\d+)\\s+\"([^\"]*)\"");
    std::istringstream lines(source);
    for (std::string line; std::getline(lines, line);) {
        where.push_back(label + ":" + std::to_string(++number));
        std::smatch m;
        if (std::regex_search(line, m, directive)) {
            label = m[2];
            number = std::stoi(m[1]) - 1;
        }
    }
    const std::regex reference("<kernel>:(\\d+):");
    std::string out;
    auto begin = log.cbegin();
    for (std::sregex_iterator it(log.begin(), log.end(), reference), end; it != end; ++it) {
        const size_t line = std::stoul((*it)[1]);
        out.append(begin, (*it)[0].first);
        out += line >= 1 && line <= where.size() ? where[line - 1] + ":" : it->str();
        begin = (*it)[0].second;
    }
    return out.append(begin, log.cend());
}

std::string kernel_definition(const std::string& function) {
    // `void NAME(` after __kernel and its attributes, or a macro that defines it: `MACRO(NAME, ...)`.
    const std::regex definition("\\bvoid\\s+" + function + "\\s*\\(|^\\s*[A-Z_][A-Z0-9_]*\\(" + function + "\\s*,");
    for (const auto& f : active_set()->files) {
        std::istringstream lines(f.text);
        int number = 0;
        for (std::string line; std::getline(lines, line);) {
            ++number;
            if (std::regex_search(line, definition)) return f.name + ":" + std::to_string(number);
        }
    }
    return "";
}

}  // namespace lenet5
