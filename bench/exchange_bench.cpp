// The parts of a step's gradient exchange, timed one by one for a model's buckets (one per layer
// with parameters), so that bench/cpu/exchange_bench.sh can predict an epoch on N devices:
//
//   lenet5_exchange_bench pinned --model M [--device D]   OpenCL: each bucket read into and written
//                                                         from pinned memory (and a pageable read)
//   lenet5_exchange_bench host --model M                  the exchange of two workers in one process
//   mpirun -np N lenet5_exchange_bench ranks --model M    the exchange across N ranks, and a bare
//                                                         MPI_Allreduce of each bucket
//   lenet5_exchange_bench step --model M --variant V --batch B [--threads T]
//                                                         one training step of B samples alone
//
// Each prints lines `what key=value ...`: the median of several runs after a warm-up, in us.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/engine_factory.h"
#include "model/model_file.h"
#include "train/grad_exchange.h"
#include "train/mpi_world.h"
#ifdef LENET5_HAVE_OPENCL
#include "opencl/pinned_mirror.h"
#endif
#ifdef LENET5_HAVE_MPI
#include <mpi.h>

#include "train/mpi_collective.h"
#endif

using namespace lenet5;

namespace {

constexpr int kRuns = 7;

// The median of kRuns timings of fn (in us), after one untimed run.
double median_us(const std::function<void()>& fn) {
    fn();
    std::vector<double> us;
    for (int r = 0; r < kRuns; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}

// The layers with parameters, the last first (the exchange's bucket order), and their sizes.
std::vector<std::pair<size_t, size_t>> buckets(const Network& net) {
    std::vector<std::pair<size_t, size_t>> b;
    for (size_t k = net.layers.size(); k-- > 0;)
        if (net.layers[k].weight_count + net.layers[k].bias_count)
            b.push_back({k, net.layers[k].weight_count + net.layers[k].bias_count});
    return b;
}

// A flat host buffer as an exchange port: what a host engine's storage is to the exchange.
class VectorPort final : public ExchangePort {
public:
    explicit VectorPort(size_t n) : values_(n, 1.0f) {}
    bool listen(BackwardListener) override { return false; }
    float* flat(FlatBuffer) override { return values_.data(); }
    void fetch(FlatBuffer, size_t) override {}
    void fetched(FlatBuffer, size_t) override {}
    void store(FlatBuffer, size_t) override {}
    void stored(FlatBuffer) override {}

private:
    std::vector<float> values_;
};

void pinned(const Network& net, int device) {
#ifdef LENET5_HAVE_OPENCL
    auto rt = std::make_shared<DeviceRuntime>(select_opencl_device(device));
    const DeviceLayout layout(net, rt->align_floats());
    cl::Buffer gradients = rt->buffer(layout.size() * sizeof(float));
    rt->fill(gradients, 0.5f, layout.size() * sizeof(float));
    PinnedMirror mirror(rt, net, layout);
    std::vector<float> pageable(net.param_count);
    std::printf("device name=\"%s\"\n", rt->device().device.getInfo<CL_DEVICE_NAME>().c_str());
    for (const auto& [layer, count] : buckets(net)) {
        std::vector<cl::Event> events;
        auto waited = [&](auto enqueue) {
            return [&, enqueue] {
                events.clear();
                enqueue();
                cl::WaitForEvents(events);
            };
        };
        const double read = median_us(waited([&] { mirror.read(gradients, layer, events); }));
        const double write = median_us(waited([&] { mirror.write(gradients, layer, events); }));
        const double paged = median_us([&] {
            rt->read(gradients, pageable.data(), count * sizeof(float));  // the same bytes, into pageable memory
        });
        std::printf("pinned layer=%s floats=%zu read_us=%.1f write_us=%.1f pageable_read_us=%.1f\n",
                    net.layers[layer].name.c_str(), count, read, write, paged);
    }
#else
    (void)net;
    (void)device;
    throw Error("this build has no OpenCL");
#endif
}

void host_sum(const Network& net) {
    VectorPort a(net.param_count), b(net.param_count);
    GradExchange exchange(net, {&a, &b}, nullptr, GradPrecision::Fp32);
    const double us = median_us([&] { exchange.run(FlatBuffer::Gradients, {0.5f, 0.5f}); });
    std::printf("host workers=2 floats=%zu exchange_us=%.1f\n", net.param_count, us);
}

void ranks(const Network& net) {
#ifdef LENET5_HAVE_MPI
    const std::unique_ptr<Collective> world = world_ranks(net.param_count);
    if (!world) throw Error("run it under mpirun -np N (N > 1)");
    VectorPort port(net.param_count);
    GradExchange exchange(net, {&port}, world.get(), GradPrecision::Fp32);
    auto timed = [&](const std::function<void()>& fn) {  // every rank runs it; rank 0's median
        MPI_Barrier(MPI_COMM_WORLD);
        return median_us([&] {
            MPI_Barrier(MPI_COMM_WORLD);
            fn();
        });
    };
    std::map<std::string, double> us;
    for (const auto& [layer, count] : buckets(net)) {
        float* data = port.flat(FlatBuffer::Gradients) + net.layers[layer].weight_offset;
        const double t = timed([&, count = count] {
            MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        });
        if (world->rank() == 0)
            std::printf("allreduce ranks=%d layer=%s floats=%zu us=%.1f\n", world->size(), net.layers[layer].name.c_str(),
                        count, t);
    }
    const double all = timed([&] { exchange.run(FlatBuffer::Gradients, {0.5f}); });
    if (world->rank() == 0) std::printf("ranks ranks=%d floats=%zu exchange_us=%.1f\n", world->size(), net.param_count, all);
#else
    (void)net;
    throw Error("this build has no MPI");
#endif
}

void step(const Network& net, const EngineRequest& request) {
    auto engine = make_engine(net, request);
    const Dataset data = random_dataset(request.batch, 1);
    engine->upload(Split::Train, data);
    engine->set_params(init_params(net, 1));
    std::vector<int32_t> order(static_cast<size_t>(data.count));
    std::iota(order.begin(), order.end(), 0);
    engine->set_order(order);
    const double us = median_us([&] {
        engine->forward(Split::Train, 0, request.batch);
        engine->backward();
        engine->update(0.01f, 0.9f, 5e-4f);
        engine->take_counters();  // waits for the device
    });
    std::printf("step variant=%s samples=%d us=%.1f\n", engine->variant().c_str(), request.batch, us);
}

int run(int argc, char** argv) {
    if (argc < 2) throw UsageError("usage: lenet5_exchange_bench pinned|host|ranks|step --model M [options]");
    const std::string mode = argv[1];
    std::string model = "cnn";
    int device = -1;
    EngineRequest request;
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--model") model = value;
        else if (flag == "--device") device = std::atoi(value.c_str());
        else if (flag == "--variant") request.variant = value;
        else if (flag == "--batch") request.batch = std::atoi(value.c_str());
        else if (flag == "--threads") request.threads = std::atoi(value.c_str());
        else throw UsageError("unknown option " + flag);
    }
    const Network net = load_model(model).net;
    if (mode == "pinned") pinned(net, device);
    else if (mode == "host") host_sum(net);
    else if (mode == "ranks") ranks(net);
    else if (mode == "step") step(net, request);
    else throw UsageError("unknown mode " + mode);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const MpiSession mpi(&argc, &argv);
    try {
        return run(argc, argv);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "lenet5_exchange_bench: error: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "lenet5_exchange_bench: error: %s\n", e.what());
        mpi_abort(1);
        return 1;
    }
}
