#include "io/read_whole_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace lenet5 {
namespace {

// Closes the descriptor however the read ends.
struct FileDescriptor {
    int fd;
    ~FileDescriptor() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

std::string read_whole_file(const std::string& path, size_t max_bytes) {
    const FileDescriptor file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
    if (file.fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(file.fd, &st) != 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw Error(path + ": not a regular file");
    const auto size = static_cast<size_t>(st.st_size);
    if (size > max_bytes)
        throw Error(path + ": " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                    " allowed");
    // One buffer of the file's size, read into once: a 553 MB model is not copied again.
    std::string bytes(size, '\0');
    size_t done = 0;
    while (done < size) {
        const ssize_t n = ::read(file.fd, bytes.data() + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    char extra;
    if (done != size || ::read(file.fd, &extra, 1) != 0)
        throw Error(path + ": read failed (the file changed while it was read?)");
    return bytes;
}

}  // namespace lenet5
