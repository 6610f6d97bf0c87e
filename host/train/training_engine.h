// The engine a training run uses (trainer.cpp): the requested engine alone, or a WorkerEngine
// (worker_engine.h) over the --workers and, under mpirun, the other ranks.
#pragma once
#include <memory>

#include "engine/engine_factory.h"
#include "train/grad_exchange.h"

namespace lenet5 {

// Throws UsageError for --grad-precision bf16 or --sync-every K > 1 without several workers or
// ranks (they would change nothing), and for both together (local SGD exchanges no gradients).
std::unique_ptr<Engine> make_training_engine(const Network& net, const EngineRequest& request,
                                             const ExchangeOptions& exchange);

}  // namespace lenet5
