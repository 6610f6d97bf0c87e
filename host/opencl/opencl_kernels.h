// The OpenCL kernel files programs are built from: the copies of cl_kernels/ embedded at build
// time (cmake/embed_kernels.cmake generates embedded_kernel_files() in the build directory), or,
// for the kernel lab (`--kernels DIR`, LENET5_KERNELS), a folder's edited copies of the same files.
#pragma once
#include <cstdlib>
#include <string>
#include <vector>

namespace lenet5 {

struct KernelFile {
    std::string name;  // e.g. "sample_layers.cl"
    std::string text;
};

// common.h, then the .cl files, in the order programs concatenate them.
const std::vector<KernelFile>& embedded_kernel_files();

// The largest kernel file a folder may hold (the embedded ones are under 64 KiB).
constexpr size_t kMaxKernelFileBytes = 4u << 20;

// `dir`'s copy of every embedded file (other files in it are ignored). Throws Error for a missing
// folder, a missing file, one that is not a regular file, or one over kMaxKernelFileBytes.
std::vector<KernelFile> read_kernel_folder(const std::string& dir);

// From now on programs are built from `dir`'s files, read (and checked) now; "" goes back to the
// embedded ones. Process-wide, for the commands: call it before any engine is made.
void use_kernel_folder(const std::string& dir);
// The folder `flag` names (--kernels DIR), else $LENET5_KERNELS, else "" (the embedded files).
inline std::string requested_kernel_folder(const std::string& flag) {
    const char* env = std::getenv("LENET5_KERNELS");
    return !flag.empty() ? flag : env ? env : "";
}

// requested_kernel_folder(flag) goes into use (use_kernel_folder). Returns the line the run's
// output begins with, naming the folder, or "" for the embedded files.
std::string use_requested_kernels(const std::string& flag);

// The folder in use, or "" for the embedded files.
std::string kernel_folder();

// The files in use, each after a line `#line 1 "FILE"` (the embedded file's name, or the folder
// file's path), so that build logs name the file and line the user edits.
std::string opencl_kernel_source();                        // all but layers/'s, in order

std::string opencl_kernel_file(const std::string& name);  // one; Error when there is no such file

// What the host wrote before the first file in a program's `source` (e.g. the per-sample path's
// #defines), or all of it when it holds no file.
std::string host_written_prefix(const std::string& source);

// `log` (a build log of `source`) with each `<kernel>:LINE:` that names a line of the whole program,
// as NVIDIA's compiler does (it ignores #line), rewritten as the FILE:LINE the source's #line
// directives give that line. Logs that name files already (PoCL's) come back unchanged.
std::string log_with_file_lines(const std::string& source, const std::string& log);

// Where `function` is defined (`__kernel void function(`) in the files in use: "file:line", or ""
// when no file defines it.
std::string kernel_definition(const std::string& function);

}  // namespace lenet5
