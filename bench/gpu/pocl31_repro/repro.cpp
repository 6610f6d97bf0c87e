// Runs repro.cl's candidate kernels on the first OpenCL device, in one work-group, and compares
// their outputs with the host's: bench/gpu/pocl31_probe.sh builds it here (g++ repro.cpp -lOpenCL)
// and runs it on the lent machine under PoCL 3.1. Exit 3 when a candidate is wrong.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#define CK(x) do { cl_int e_ = (x); if (e_) { std::printf("error %d at %s\n", e_, #x); return 1; } } while (0)
int main(int argc, char** argv) {
    std::ifstream f(argc > 1 ? argv[1] : "repro.cl"); std::stringstream ss; ss << f.rdbuf(); std::string src = ss.str();
    cl_platform_id p; cl_device_id d; cl_int err;
    CK(clGetPlatformIDs(1, &p, nullptr)); CK(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, nullptr));
    char name[256]; clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof name, name, nullptr); std::printf("device: %s\n", name);
    cl_context c = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err); CK(err);
    cl_command_queue q = clCreateCommandQueue(c, d, 0, &err); CK(err);
    const char* s = src.c_str(); cl_program prog = clCreateProgramWithSource(c, 1, &s, nullptr, &err); CK(err);
    if (clBuildProgram(prog, 1, &d, "", nullptr, nullptr)) { char log[20000]; clGetProgramBuildInfo(prog, d, CL_PROGRAM_BUILD_LOG, sizeof log, log, nullptr); std::printf("%s\n", log); return 1; }
    const int SG = 256, steps = 6, rows = 200;
    std::vector<float> in(3 * 1024 * 8);
    for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(0.37f * (float)i);
    // host results
    std::vector<float> want1(SG, 0.0f), want2(steps * 256, 0.0f), want3(steps * 256, -1.0f);
    for (int lid = 0; lid < SG; ++lid) for (int k = 0; k < steps; ++k) want1[lid] += in[k * SG + (lid + 1) % SG] * (float)(k + 1);
    { int cur = 0; for (int k = 0; k < steps; ++k) { const float* x = &in[cur * 1024];
        for (int o = 0; o < rows; ++o) { float sum = 0; for (int lane = 0; lane < 8; ++lane) { float sv = 0; for (int i = lane * 4; i < 784; i += 32) sv += x[i]*x[i+1] + x[i+2]*x[i+3] + (float)o; sum += sv; } want2[k*256+o] = sum; }
        cur = cur == 1 ? 2 : 1; } }
    { int cur = 0; for (int k = 0; k < steps; ++k) { const int next = cur == 1 ? 2 : 1; const float* x = &in[next * 1024];
        for (int o = 0; o < rows; ++o) { float sum = 0; for (int lane = 0; lane < 8; ++lane) { float sv = 0; for (int i = lane * 4; i < 784; i += 32) sv += x[i]*x[i+1] + x[i+2]*x[i+3] + (float)o; sum += sv; } want3[k*256+o] = sum; }
        cur = next; } }
    cl_mem bin = clCreateBuffer(c, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, in.size() * 4, in.data(), &err); CK(err);
    cl_mem bout = clCreateBuffer(c, CL_MEM_READ_WRITE, steps * 256 * 4, nullptr, &err); CK(err);
    unsigned zero[2] = {0, 0};
    cl_mem bflags = clCreateBuffer(c, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, 8, zero, &err); CK(err);
    int failures = 0;
    for (const char* k : {"c1_bare", "c1_guarded", "c2_bare", "c2_guarded", "c3_bare", "c3_guarded"}) {
        cl_kernel kk = clCreateKernel(prog, k, &err); CK(err);
        std::vector<float> zeros(steps * 256, -1.0f);
        CK(clEnqueueWriteBuffer(q, bout, CL_TRUE, 0, zeros.size() * 4, zeros.data(), 0, nullptr, nullptr));
        int st = steps, cur = 0, rw = rows;
        clSetKernelArg(kk, 0, sizeof bin, &bin); clSetKernelArg(kk, 1, sizeof st, &st);
        clSetKernelArg(kk, 2, sizeof bout, &bout); clSetKernelArg(kk, 3, sizeof bflags, &bflags);
        const bool two = k[1] != '1';
        int prep = 1;
        if (two) { clSetKernelArg(kk, 4, sizeof cur, &cur); clSetKernelArg(kk, 5, sizeof rw, &rw); }
        if (k[1] == '3') clSetKernelArg(kk, 6, sizeof prep, &prep);
        size_t g = SG, l = SG;
        CK(clEnqueueNDRangeKernel(q, kk, 1, nullptr, &g, &l, 0, nullptr, nullptr));
        std::vector<float> got(steps * 256);
        CK(clEnqueueReadBuffer(q, bout, CL_TRUE, 0, got.size() * 4, got.data(), 0, nullptr, nullptr));
        double worst = 0; int bad = 0;
        const std::vector<float>& want = k[1] == '3' ? want3 : two ? want2 : want1;
        const size_t n = two ? want2.size() : want1.size();
        for (size_t i = 0; i < n; ++i) { if (two && (i % 256) >= (size_t)rows) continue;
            double e = std::fabs(got[i] - want[i]) / (std::fabs(want[i]) + 1e-3); if (e > 1e-3) ++bad; if (e > worst) worst = e; }
        std::printf("%-12s %s (%d wrong values, worst relative error %.3g)\n", k, bad ? "WRONG" : "right", bad, worst);
        failures += bad != 0;
        clReleaseKernel(kk);
    }
    return failures ? 3 : 0;
}
