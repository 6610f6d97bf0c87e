// Files the way users pass them: outputs through symlinks, FIFOs, devices and
// /dev/stdout are written through, never replaced; inputs that are not regular files
// are refused at once. Also gives the whole suite its own temporary folder.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "cli_runner.h"
#include "common/error.h"
#include "io/mnist.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace lenet5;

namespace {

// Removes the folders lenet5_tests_<pid>_* in `base` whose process is gone.
void remove_folders_of_dead_processes(const fs::path& base) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(base, ec)) {
        int pid = 0;
        char rest[16];
        const std::string name = entry.path().filename().string();
        if (std::sscanf(name.c_str(), "lenet5_tests_%d_%15s", &pid, rest) != 2 || pid <= 0) continue;
        if (::kill(pid, 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), ec);
    }
}

// Every test process (ctest runs one per test) works in a fresh folder under the
// system's temporary folder and removes it at the end: TempDir() (gtest reads
// TEST_TMPDIR), the lenet5 processes it starts (TMPDIR) and the default tuning cache
// (XDG_CACHE_HOME) all point into it. The folder is named after the process, so that
// the next test process removes those of processes that crashed.
class SuiteTempDir : public ::testing::Environment {
public:
    void SetUp() override {
        const char* env = std::getenv("TMPDIR");
        const fs::path base = env && *env ? env : "/tmp";
        remove_folders_of_dead_processes(base);
        std::string tmpl = (base / ("lenet5_tests_" + std::to_string(::getpid()) + "_XXXXXX")).string();
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << tmpl << ": " << std::strerror(errno);
        dir_ = tmpl;
        for (const char* name : {"TEST_TMPDIR", "TMPDIR"}) ::setenv(name, dir_.c_str(), 1);
        share_pocl_kernel_cache();
        ::setenv("XDG_CACHE_HOME", (dir_ + "/cache").c_str(), 1);
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

private:
    // PoCL keeps its compiled kernels under XDG_CACHE_HOME too: left there, every test process
    // (one per test under ctest) would compile every kernel again, tens of seconds for CLBlast's.
    // Its cache (keyed by source and options) stays the user's, shared by the test processes.
    static void share_pocl_kernel_cache() {
        if (const char* set = std::getenv("POCL_CACHE_DIR"); set && *set) return;
        const char* xdg = std::getenv("XDG_CACHE_HOME");
        const char* home = std::getenv("HOME");
        if (!(xdg && *xdg) && !(home && *home)) return;
        const fs::path dir = (xdg && *xdg ? fs::path(xdg) : fs::path(home) / ".cache") / "pocl" / "kcache";
        std::error_code ec;
        fs::create_directories(dir, ec);
        if (!ec) ::setenv("POCL_CACHE_DIR", dir.c_str(), 1);
    }

    std::string dir_;
};

const auto* const kSuiteTempDir = ::testing::AddGlobalTestEnvironment(new SuiteTempDir);

// A fresh folder for one test, inside the suite's.
fs::path make_folder(const std::string& name) {
    const fs::path dir = fs::path(::testing::TempDir()) / name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

std::string read_text(const fs::path& p) { return test::slurp(p.string()); }

std::set<std::string> names_in(const fs::path& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
}

// Runs `load` on a FIFO that no one writes; it must throw within a second. If it
// blocks instead, a writer is opened and closed so that it returns, and the test fails.
void expect_refused_at_once(const fs::path& fifo, const std::function<void()>& load) {
    auto done = std::async(std::launch::async, [&] {
        try {
            load();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    });
    if (done.wait_for(std::chrono::seconds(1)) == std::future_status::timeout) {
        ADD_FAILURE() << fifo << ": the loader blocked on the FIFO";
        const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) ::close(fd);
    }
    const std::string error = done.get();
    EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

// Reads a FIFO until its writer closes it, giving up after 5 seconds. The read end is
// opened without blocking, so a writer that never comes fails the test instead of hanging it.
std::string read_fifo(const fs::path& fifo) {
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd < 0) return "cannot open the FIFO";
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd p{fd, POLLIN, 0};
        // Linux reports no event on a FIFO whose writer has not yet come, only data or its hang-up.
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
        char buf[65536];
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) got.append(buf, static_cast<size_t>(n));
        else if (n == 0 || errno != EAGAIN) break;
    }
    ::close(fd);
    return got;
}

TEST(Files, TheSuiteWritesInsideItsOwnTemporaryFolder) {
    const fs::path dir = ::testing::TempDir();
    const std::string name = dir.parent_path().filename().string();
    EXPECT_EQ(name.rfind("lenet5_tests_" + std::to_string(::getpid()) + "_", 0), 0u) << dir;
    EXPECT_TRUE(fs::is_directory(dir)) << dir;
}

TEST(Files, TheFolderOfACrashedTestProcessIsRemovedByTheNext) {
    const fs::path base = ::testing::TempDir();
    const pid_t gone = ::fork();  // a process id that is sure to be free: a child that has exited
    if (gone == 0) ::_exit(0);
    ASSERT_GT(gone, 0);
    ::waitpid(gone, nullptr, 0);
    const fs::path stale = base / ("lenet5_tests_" + std::to_string(gone) + "_abcdef");
    const fs::path live = base / ("lenet5_tests_" + std::to_string(::getpid()) + "_abcdef");
    fs::create_directories(stale / "sub");
    fs::create_directories(live);
    remove_folders_of_dead_processes(base);
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_TRUE(fs::exists(live));
}

TEST(Files, SymlinkStaysAndItsTargetGetsTheContent) {
    const fs::path dir = make_folder("symlink");
    std::ofstream(dir / "real.json") << "old";
    fs::create_symlink("real.json", dir / "link.json");
    write_file_atomic((dir / "link.json").string(), "new");
    EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
    EXPECT_EQ(read_text(dir / "real.json"), "new");
    EXPECT_EQ(names_in(dir), (std::set<std::string>{"link.json", "real.json"}));  // no temporary left
}

TEST(Files, DanglingSymlinkCreatesItsTarget) {
    const fs::path dir = make_folder("dangling");
    fs::create_directories(dir / "sub");
    fs::create_symlink("sub/report.json", dir / "link.json");
    write_file_atomic((dir / "link.json").string(), "made");
    EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
    EXPECT_EQ(read_text(dir / "sub/report.json"), "made");
}

TEST(Files, FifoIsWrittenThroughToItsReader) {
    const fs::path fifo = make_folder("fifo") / "plot";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
    const std::string contents(1 << 20, 'x');  // more than a pipe holds: the reader must drain it
    auto reader = std::async(std::launch::async, [&] { return read_fifo(fifo); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the reader opens first
    write_file_atomic(fifo.string(), contents);
    EXPECT_EQ(reader.get().size(), contents.size());
    struct stat st {};
    ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
}

TEST(Files, CharacterDeviceIsWrittenThroughNotReplaced) {
    const fs::path dir = make_folder("device");
    const fs::path null_dev = dir / "null", full_dev = dir / "full";  // the nodes of /dev/null and /dev/full
    if (::mknod(null_dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0 ||
        ::mknod(full_dev.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0)
        GTEST_SKIP() << "mknod is not permitted here: " << std::strerror(errno);
    write_file_atomic(null_dev.string(), "discarded");
    try {
        write_file_atomic(full_dev.string(), "no room");
        ADD_FAILURE() << "writing to a /dev/full node succeeded: it was replaced, not written";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(std::strerror(ENOSPC)), std::string::npos) << e.what();
    }
    for (const fs::path& p : {null_dev, full_dev}) {
        struct stat st {};
        ASSERT_EQ(::lstat(p.c_str(), &st), 0);
        EXPECT_TRUE(S_ISCHR(st.st_mode)) << p << " was replaced";
    }
    EXPECT_EQ(names_in(dir), (std::set<std::string>{"full", "null"}));
}

TEST(Files, DirectoryIsAnError) {
    const fs::path dir = make_folder("directory");
    try {
        write_file_atomic(dir.string(), "x");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fs::is_empty(dir));
}

TEST(Files, StaleTemporariesAreRemovedOnTheNextSave) {
    const fs::path dir = make_folder("stale");
    const pid_t gone = ::fork();  // a process id that is sure to be free: a child that has exited
    if (gone == 0) ::_exit(0);
    ASSERT_GT(gone, 0);
    ::waitpid(gone, nullptr, 0);
    const std::string dead = "ck.tmp." + std::to_string(gone), alive = "ck.tmp." + std::to_string(::getppid());
    for (const std::string& name : {dead, alive, std::string("ck.tmp.notes"), "other.tmp." + std::to_string(gone)})
        std::ofstream(dir / name) << "partial";
    write_file_atomic((dir / "ck").string(), "saved");
    EXPECT_EQ(read_text(dir / "ck"), "saved");
    EXPECT_EQ(names_in(dir), (std::set<std::string>{"ck", alive, "ck.tmp.notes", "other.tmp." + std::to_string(gone)}));
}

TEST(Files, FifoAsIdxFileIsRefusedAtOnce) {
    const fs::path dir = make_folder("idx_fifo");
    const fs::path fifo = dir / "t10k-images-idx3-ubyte";
    for (const char* name : {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
        ASSERT_EQ(::mkfifo((dir / name).c_str(), 0600), 0) << std::strerror(errno);
    expect_refused_at_once(fifo, [&] { load_mnist(dir.string(), Split::Test, 10); });
}

TEST(Files, FifoAsCheckpointIsRefusedAtOnce) {
    const fs::path fifo = make_folder("ck_fifo") / "model.ck";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
    expect_refused_at_once(fifo, [&] { load_checkpoint(fifo.string()); });
}

TEST(Files, DashAsDataIsAUsageError) {
    const test::CliResult r = test::run_cli("train --variant cpu --data -");
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.err.rfind("lenet5: error: --data", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

// `lenet5 train --json <stdout>`, its stdout through `redirect` (e.g. "| cat >file"):
// what reaches the file is the table, then the JSON report.
void expect_report_on_stdout(const std::string& json_flag, const std::string& redirect) {
    const std::string data = test::mnist_dir();
    if (data.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    const fs::path out = make_folder("stdout") / "out.txt";
    const std::string cmd = std::string(LENET5_BINARY) + " train --variant cpu --epochs 1 --train-limit 64 --test-limit 10" +
                            " --data " + data + " --json " + json_flag + " </dev/null " + redirect + out.string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const std::string text = read_text(out);
    EXPECT_NE(text.find("forward_ms"), std::string::npos) << text;  // the table came first, whole
    const size_t json = text.find("\n{");
    ASSERT_NE(json, std::string::npos) << text;
    EXPECT_EQ(nlohmann::json::parse(text.substr(json + 1)).at("variant"), "cpu");
}

TEST(Files, DevStdoutThroughAPipeGetsTheReport) { expect_report_on_stdout("/dev/stdout", "| cat >"); }

TEST(Files, DevStdoutRedirectedToAFileGetsTheReportAfterTheTable) { expect_report_on_stdout("/dev/stdout", ">"); }

TEST(Files, DashIsStandardOutput) { expect_report_on_stdout("-", "| cat >"); }

}  // namespace
