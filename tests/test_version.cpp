// `lenet5 --version` says what was built: each option as this build's compile
// definitions have it, so that a bug report carries it.
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.h"

namespace {

TEST(Version, ListsTheBuildOptions) {
    const lenet5::test::CliResult r = lenet5::test::run_cli("--version");
    ASSERT_EQ(r.status, 0) << r.err;
#ifdef LENET5_HAVE_OPENCL
    const std::string opencl = "OpenCL yes";
#else
    const std::string opencl = "OpenCL no";
#endif
#ifdef LENET5_HAVE_SIMD
    const std::string simd = "SIMD avx2 avx512 (this CPU: ";
#else
    const std::string simd = "SIMD no";
#endif
#ifdef LENET5_HAVE_OPENMP
    const std::string openmp = "OpenMP yes";
#else
    const std::string openmp = "OpenMP no";
#endif
#ifdef LENET5_HAVE_MPI
    const std::string mpi = "MPI yes";
#else
    const std::string mpi = "MPI no";
#endif
#ifdef LENET5_HAVE_CLBLAST
    const std::string clblast = "CLBlast yes";
#else
    const std::string clblast = "CLBlast no";
#endif
#ifdef LENET5_HAVE_ONNX
    const std::string onnx = "ONNX yes";
#else
    const std::string onnx = "ONNX no";
#endif
#ifdef LENET5_HAVE_OPENBLAS
    const std::string openblas = "OpenBLAS yes";
#else
    const std::string openblas = "OpenBLAS no";
#endif
    const size_t line = r.out.find("\nbuild: ");
    ASSERT_NE(line, std::string::npos) << r.out;
    const std::string build = r.out.substr(line + 1);
    for (const std::string& part : {opencl, simd, openmp, openblas, clblast, mpi, onnx})
        EXPECT_NE(build.find(part), std::string::npos) << part << " in " << build;
}

}  // namespace
