#include "train/training_engine.h"

#include "common/error.h"
#include "train/mpi_world.h"
#include "train/worker_engine.h"

namespace lenet5 {

std::unique_ptr<Engine> make_training_engine(const Network& net, const EngineRequest& request,
                                             const ExchangeOptions& exchange) {
    const std::vector<WorkerSpec> specs = request.workers.empty() ? std::vector<WorkerSpec>{} : parse_workers(request.workers);
    std::unique_ptr<Collective> ranks = world_ranks(net.param_count);
    const bool bf16 = exchange.precision == GradPrecision::Bf16;
    if (specs.size() < 2 && !ranks && !exchange.is_default())
        throw UsageError(std::string(bf16 ? "--grad-precision bf16" : "--sync-every") +
                         " needs several workers (--workers A,B) or ranks (mpirun -np N)");
    if (bf16 && exchange.sync_every > 1)
        throw UsageError("--grad-precision bf16 rounds the gradients that --sync-every " +
                         std::to_string(exchange.sync_every) + " does not exchange (its parameters are averaged in fp32)");
    if (specs.empty() && !ranks) return make_engine(net, request);

    std::vector<std::unique_ptr<Engine>> workers;
    std::vector<double> shares;
    EngineRequest one = request;
    one.workers.clear();
    if (specs.empty()) workers.push_back(make_engine(net, one));
    for (const WorkerSpec& w : specs) {
        one.variant = w.variant;
        one.device = w.device;
        workers.push_back(make_engine(net, one));
        if (w.share > 0) shares.push_back(w.share);
    }
    return std::make_unique<WorkerEngine>(net, std::move(workers), std::move(shares), request.batch, exchange,
                                          std::move(ranks));
}

}  // namespace lenet5
