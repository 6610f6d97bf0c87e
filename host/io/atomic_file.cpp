#include "io/atomic_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>

#include "common/error.h"

namespace lenet5 {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
    throw Error(path + ": " + what + ": " + std::strerror(err));
}

// False with errno set when a write fails.
bool write_all(int fd, const std::string& contents) {
    size_t done = 0;
    while (done < contents.size()) {
        const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

bool on_procfs(const fs::path& p) {
    struct statfs s {};
    return ::statfs(p.empty() ? "." : p.c_str(), &s) == 0 && s.f_type == PROC_SUPER_MAGIC;
}

// The path with the symbolic links of its last component followed, also to a target
// that does not exist yet (realpath refuses those). nullopt for a link in /proc
// (/dev/stdout, /dev/fd/N): an open file of this process, whose "target" may be
// "pipe:[123]" or a file the shell redirected to; it is written as a stream.
std::optional<fs::path> follow_links(const std::string& path) {
    fs::path p = path;
    std::error_code ec;
    for (int hops = 0; fs::is_symlink(p, ec); ++hops) {
        if (hops == 40) throw Error(path + ": too many levels of symbolic links");
        if (on_procfs(p.parent_path())) return std::nullopt;
        const fs::path link = fs::read_symlink(p, ec);
        if (ec) throw Error(path + ": cannot read the symbolic link " + p.string() + ": " + ec.message());
        p = p.parent_path() / link;  // an absolute link replaces the whole path
    }
    return p;
}

void write_stream(const std::string& path, const std::string& contents) {
    std::cout.flush();  // what the program printed before comes first on a shared stdout
    const bool std_out = path == "-";
    // O_APPEND: /dev/stdout redirected to a file reopens that file at offset 0, which
    // would overwrite what was printed before; on pipes and devices it changes nothing.
    const int fd = std_out ? STDOUT_FILENO : ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) fail(path, "cannot open for writing", errno);
    bool ok = write_all(fd, contents);
    int err = errno;
    if (!std_out && ::close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok) fail(path, "write failed", err);
}

// Temporaries "<name>.tmp.<pid>" whose process is gone (killed mid-save); those of
// a live process may be a save in progress and stay.
void remove_stale_temporaries(const fs::path& folder, const std::string& prefix) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder.empty() ? "." : folder, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(prefix, 0) != 0) continue;
        const std::string pid = name.substr(prefix.size());
        if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
        if (::kill(std::stoi(pid), 0) == 0 || errno == EPERM) continue;
        fs::remove(entry.path(), ec);
    }
}

void replace_file(const std::string& path, const fs::path& target, const std::string& contents, mode_t mode) {
    const std::string prefix = target.filename().string() + ".tmp.";
    const fs::path folder = target.parent_path();
    const std::string tmp = (folder / (prefix + std::to_string(::getpid()))).string();
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) fail(path, "cannot write", errno);
    bool ok = write_all(fd, contents) && ::fsync(fd) == 0;
    int err = errno;
    if (::close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        ::unlink(tmp.c_str());
        fail(path, "write failed", err);
    }
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
        const int rename_err = errno;
        ::unlink(tmp.c_str());
        fail(path, "cannot rename into place", rename_err);
    }
    // The rename is durable once the folder is synced; best effort, as some file systems refuse.
    const int dir = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        ::fsync(dir);
        ::close(dir);
    }
    remove_stale_temporaries(folder, prefix);
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& contents) {
    if (path == "-") return write_stream(path, contents);
    const std::optional<fs::path> target = follow_links(path);
    if (!target) return write_stream(path, contents);
    struct stat st {};
    const bool exists = ::stat(target->c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) throw Error(path + ": is a directory");
    if (exists && !S_ISREG(st.st_mode)) return write_stream(path, contents);
    replace_file(path, *target, contents, exists ? (st.st_mode & 07777) : 0644);
}

}  // namespace lenet5
