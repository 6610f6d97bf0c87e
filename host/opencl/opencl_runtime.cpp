#include "opencl/opencl_runtime.h"

#include <cstdlib>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "train/mpi_world.h"
#include "opencl/opencl_backend.h"
#include "opencl/opencl_kernels.h"

namespace lenet5 {

std::vector<OpenCLDevice> opencl_devices() {
    return cl_checked([] {
        std::vector<cl::Platform> platforms;
        try {
            cl::Platform::get(&platforms);
        } catch (const cl::Error& e) {
            // The ICD loader's answer when no platform is installed.
            if (e.err() == CL_PLATFORM_NOT_FOUND_KHR) return std::vector<OpenCLDevice>{};
            throw;
        }
        std::vector<OpenCLDevice> devices;
        for (const auto& platform : platforms) {
            std::vector<cl::Device> found;
            try {
                platform.getDevices(CL_DEVICE_TYPE_ALL, &found);
            } catch (const cl::Error& e) {
                if (e.err() == CL_DEVICE_NOT_FOUND) continue;  // a platform without devices
                throw;
            }
            for (const auto& device : found) {
                OpenCLDevice d;
                d.index = static_cast<int>(devices.size());
                d.platform = platform;
                d.device = device;
                d.platform_name = platform.getInfo<CL_PLATFORM_NAME>();
                d.name = device.getInfo<CL_DEVICE_NAME>();
                d.driver = device.getInfo<CL_DRIVER_VERSION>();
                d.is_gpu = (device.getInfo<CL_DEVICE_TYPE>() & CL_DEVICE_TYPE_GPU) != 0;
                const char* method = std::getenv("POCL_WORK_GROUP_METHOD");
                d.miscompiles_step_run_groups =
                    platform.getInfo<CL_PLATFORM_VERSION>().find("PoCL 3.1") != std::string::npos &&
                    d.name.find("avx512") != std::string::npos && (!method || std::string(method) == "loopvec");
                devices.push_back(std::move(d));
            }
        }
        return devices;
    });
}

OpenCLDevice select_opencl_device(int index) {
    const auto devices = opencl_devices();
    if (devices.empty())
        throw Error("no OpenCL device found (no platform with devices is installed; see `lenet5 devices`)");
    if (index < 0) {
        // Under mpirun each rank on a machine takes the next GPU (rank 0 the first).
        const int nth = mpi_world().local_rank;
        int gpus = 0;
        for (const auto& d : devices)
            if (d.is_gpu && gpus++ == nth) return d;
        if (nth == 0) return devices.front();
        throw Error("rank " + std::to_string(mpi_world().rank) + " takes this machine's GPU " + std::to_string(nth) +
                    ", but it has " + std::to_string(gpus) + "; run fewer ranks per machine or pass --device");
    }
    if (index >= static_cast<int>(devices.size()))
        throw Error("OpenCL device " + std::to_string(index) + " does not exist (" + std::to_string(devices.size()) +
                    (devices.size() == 1 ? " device" : " devices") + "; see `lenet5 devices`)");
    return devices[static_cast<size_t>(index)];
}

std::string cl_error_name(cl_int code) {
    switch (code) {
#define LENET5_CL_ERROR(name) \
    case name: return #name;
        LENET5_CL_ERROR(CL_DEVICE_NOT_FOUND)
        LENET5_CL_ERROR(CL_DEVICE_NOT_AVAILABLE)
        LENET5_CL_ERROR(CL_COMPILER_NOT_AVAILABLE)
        LENET5_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        LENET5_CL_ERROR(CL_OUT_OF_RESOURCES)
        LENET5_CL_ERROR(CL_OUT_OF_HOST_MEMORY)
        LENET5_CL_ERROR(CL_PROFILING_INFO_NOT_AVAILABLE)
        LENET5_CL_ERROR(CL_MEM_COPY_OVERLAP)
        LENET5_CL_ERROR(CL_IMAGE_FORMAT_MISMATCH)
        LENET5_CL_ERROR(CL_IMAGE_FORMAT_NOT_SUPPORTED)
        LENET5_CL_ERROR(CL_BUILD_PROGRAM_FAILURE)
        LENET5_CL_ERROR(CL_MAP_FAILURE)
        LENET5_CL_ERROR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        LENET5_CL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        LENET5_CL_ERROR(CL_COMPILE_PROGRAM_FAILURE)
        LENET5_CL_ERROR(CL_LINKER_NOT_AVAILABLE)
        LENET5_CL_ERROR(CL_LINK_PROGRAM_FAILURE)
        LENET5_CL_ERROR(CL_DEVICE_PARTITION_FAILED)
        LENET5_CL_ERROR(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
        LENET5_CL_ERROR(CL_INVALID_VALUE)
        LENET5_CL_ERROR(CL_INVALID_DEVICE_TYPE)
        LENET5_CL_ERROR(CL_INVALID_PLATFORM)
        LENET5_CL_ERROR(CL_INVALID_DEVICE)
        LENET5_CL_ERROR(CL_INVALID_CONTEXT)
        LENET5_CL_ERROR(CL_INVALID_QUEUE_PROPERTIES)
        LENET5_CL_ERROR(CL_INVALID_COMMAND_QUEUE)
        LENET5_CL_ERROR(CL_INVALID_HOST_PTR)
        LENET5_CL_ERROR(CL_INVALID_MEM_OBJECT)
        LENET5_CL_ERROR(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
        LENET5_CL_ERROR(CL_INVALID_IMAGE_SIZE)
        LENET5_CL_ERROR(CL_INVALID_SAMPLER)
        LENET5_CL_ERROR(CL_INVALID_BINARY)
        LENET5_CL_ERROR(CL_INVALID_BUILD_OPTIONS)
        LENET5_CL_ERROR(CL_INVALID_PROGRAM)
        LENET5_CL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
        LENET5_CL_ERROR(CL_INVALID_KERNEL_NAME)
        LENET5_CL_ERROR(CL_INVALID_KERNEL_DEFINITION)
        LENET5_CL_ERROR(CL_INVALID_KERNEL)
        LENET5_CL_ERROR(CL_INVALID_ARG_INDEX)
        LENET5_CL_ERROR(CL_INVALID_ARG_VALUE)
        LENET5_CL_ERROR(CL_INVALID_ARG_SIZE)
        LENET5_CL_ERROR(CL_INVALID_KERNEL_ARGS)
        LENET5_CL_ERROR(CL_INVALID_WORK_DIMENSION)
        LENET5_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
        LENET5_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
        LENET5_CL_ERROR(CL_INVALID_GLOBAL_OFFSET)
        LENET5_CL_ERROR(CL_INVALID_EVENT_WAIT_LIST)
        LENET5_CL_ERROR(CL_INVALID_EVENT)
        LENET5_CL_ERROR(CL_INVALID_OPERATION)
        LENET5_CL_ERROR(CL_INVALID_GL_OBJECT)
        LENET5_CL_ERROR(CL_INVALID_BUFFER_SIZE)
        LENET5_CL_ERROR(CL_INVALID_MIP_LEVEL)
        LENET5_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
        LENET5_CL_ERROR(CL_INVALID_PROPERTY)
        LENET5_CL_ERROR(CL_INVALID_IMAGE_DESCRIPTOR)
        LENET5_CL_ERROR(CL_INVALID_COMPILER_OPTIONS)
        LENET5_CL_ERROR(CL_INVALID_LINKER_OPTIONS)
        LENET5_CL_ERROR(CL_INVALID_DEVICE_PARTITION_COUNT)
        LENET5_CL_ERROR(CL_PLATFORM_NOT_FOUND_KHR)
#undef LENET5_CL_ERROR
        default: return "OpenCL error " + std::to_string(code);
    }
}

Error cl_failure(const cl::Error& e) {
    return Error("OpenCL error " + cl_error_name(e.err()) + " (" + std::to_string(e.err()) + ") in " + e.what());
}

cl::Program build_program(const cl::Context& context, const cl::Device& device, const std::string& source,
                          const std::string& options) {
    return cl_checked([&] {
        cl::Program program(context, source);
        try {
            program.build({device}, options.c_str());
        } catch (const cl::Error& e) {
            if (e.err() != CL_BUILD_PROGRAM_FAILURE) throw;
            std::string log = log_with_file_lines(source, program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(device));
            while (!log.empty() && (log.back() == '\n' || log.back() == '\0')) log.pop_back();
            // The program reports errors on one line: the log's lines are joined with " | ".
            std::string joined;
            std::istringstream lines(log);
            for (std::string line; std::getline(lines, line);)
                if (!line.empty()) joined += (joined.empty() ? "" : " | ") + line;
            throw Error("OpenCL kernels failed to build for " + device.getInfo<CL_DEVICE_NAME>() + " (options '" +
                        options + "'): " + (joined.empty() ? "no build log" : joined));
        }
        return program;
    });
}

bool opencl_gpu_available() {
    try {
        for (const auto& d : opencl_devices())
            if (d.is_gpu) return true;
    } catch (const Error&) {
        // A broken platform means no usable GPU for `auto`.
    }
    return false;
}

namespace {
std::string bytes_text(cl_ulong bytes) {
    const char* const units[] = {"bytes", "KiB", "MiB", "GiB"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024 && unit < 3) {
        value /= 1024;
        ++unit;
    }
    std::ostringstream s;
    s << std::setprecision(3) << value << ' ' << units[unit];
    return s.str();
}

std::string type_text(cl_device_type type) {
    if (type & CL_DEVICE_TYPE_GPU) return "GPU";
    if (type & CL_DEVICE_TYPE_CPU) return "CPU";
    if (type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
    return "other";
}
}  // namespace

void print_opencl_devices(std::ostream& out) {
    const auto devices = opencl_devices();
    if (devices.empty()) {
        out << "no OpenCL devices (no platform with devices is installed)\n";
        return;
    }
    cl_checked([&] {
        for (const auto& d : devices) {
            const cl::Device& dev = d.device;
            out << d.index << ": " << d.platform_name << " / " << d.name << " | " << type_text(dev.getInfo<CL_DEVICE_TYPE>())
                << " | " << dev.getInfo<CL_DEVICE_MAX_COMPUTE_UNITS>() << " compute units | "
                << bytes_text(dev.getInfo<CL_DEVICE_GLOBAL_MEM_SIZE>()) << " global | "
                << bytes_text(dev.getInfo<CL_DEVICE_LOCAL_MEM_SIZE>()) << " local | max work-group "
                << dev.getInfo<CL_DEVICE_MAX_WORK_GROUP_SIZE>() << " | " << dev.getInfo<CL_DEVICE_OPENCL_C_VERSION>()
                << "\n";
        }
    });
}

}  // namespace lenet5
