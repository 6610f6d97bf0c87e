// The gradient exchange of several engines training together: the workers of one process
// (`--workers`) and the ranks of `mpirun`, through one reducer.
//
// It works per bucket, one layer's parameters (weights, then biases), in place in each engine's
// flat host view (exchange_port.h): a host engine's own storage, a device engine's pinned
// mirror. A bucket is started as soon as every local contributor has it (a host engine's
// backward() announces each layer as it completes it, the last layer first; the batch-level
// OpenCL engine reads each layer's bucket while the device computes the layers below, and
// announces it once read; the per-sample one's buckets are read once its backward() returns): its
// contributions are summed in worker order into the first contributor's view, each weighed by
// its share of the batch, and that sum goes to the other ranks (MPI_Iallreduce in place, or an
// MPI_Iallgather in bfloat16) while the backward of the layers below goes on; without ranks, the same pass writes the sum into every engine's
// view. finish() waits for the buckets in order (copies the ranks' result into every view) and
// sends each back to its engine, once per bucket. The host passes over a large bucket run on up
// to 8 cores (for_blocks.h). The order of every sum is fixed, so a seed gives the same run twice.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "train/collective.h"

namespace lenet5 {

enum class GradPrecision {
    Fp32,
    // Each exchanged gradient (a worker's, a rank's) rounded to bfloat16, to nearest even; the sums
    // are taken in fp32. Parameters (--sync-every) are always averaged in fp32. Across ranks it halves the bytes sent per rank at 2 ranks (an allgather:
    // (N-1) x 2 bytes per value against an fp32 allreduce's 2(N-1)/N x 4), as many at 4, more above.
    Bf16,
};

// --grad-precision and --sync-every.
struct ExchangeOptions {
    GradPrecision precision = GradPrecision::Fp32;
    // 1: every step's gradients are summed (exact). K > 1: local SGD, every worker steps on its own
    // slice's gradients and the parameters are averaged every K steps (and at the end of an epoch).
    int sync_every = 1;
    bool is_default() const { return precision == GradPrecision::Fp32 && sync_every == 1; }
};

// fp32 or bf16; anything else throws UsageError.
GradPrecision parse_grad_precision(const std::string& text);

class GradExchange {
public:
    // ports: the engines that take part, in worker order (each receives every result);
    // ranks: the other processes, or null.
    GradExchange(const Network& net, std::vector<ExchangePort*> ports, Collective* ranks, GradPrecision precision);

    // A new exchange of `which`: port i's values count weights[i] times in the sum (0: it gives
    // nothing this time, and still receives the result). inline_driver: the one contributor runs
    // on this thread (backward() below), so each announced bucket starts at once; otherwise
    // this thread calls drive() while the contributors run on theirs.
    void begin(FlatBuffer which, std::vector<float> weights, bool inline_driver);
    // On contributor i's thread: its engine's backward(), announcing the buckets as they are final.
    void backward(size_t i, Engine& engine);
    // A contributor failed: drive() stops waiting.
    void abandon();
    // Starts every bucket whose contributions are all in, in bucket order; with `wait`, until every
    // bucket has started. Returns false if a contributor failed.
    bool drive(bool wait);
    // Waits for every bucket's sum and writes it into every port.
    void finish();
    // The whole exchange of values that are final already (parameters to average, gradients of
    // a backward that ran before): begin, every contribution, finish.
    void run(FlatBuffer which, std::vector<float> weights);

    // Milliseconds this thread spent exchanging (summing, starting, waiting for the ranks,
    // writing back) since the last call.
    double take_ms();

private:
    struct Bucket {
        size_t layer, offset, count;  // count floats at `offset` of the flat layout
    };
    void contribute(size_t i);  // fetches and announces port i's every bucket
    void fetch_all(size_t i);         // starts the reads of port i's every bucket
    void announce_fetched(size_t i);  // waits for each and announces it
    void announce(size_t layer);
    void start(size_t b);
    void sum_locally(const Bucket& bucket, float* into, const std::vector<float*>& copies);
    std::vector<float*> other_views(const Bucket& bucket);

    std::vector<Bucket> buckets_;      // layers with parameters, the last layer first
    std::vector<size_t> bucket_of_;    // per layer
    std::vector<ExchangePort*> ports_;
    Collective* ranks_;
    GradPrecision precision_;
    std::vector<uint16_t> send_, received_;  // bf16 across ranks: this rank's sum, every rank's ([rank][count] per bucket)

    FlatBuffer which_ = FlatBuffer::Gradients;
    std::vector<float> weights_;
    std::vector<size_t> contributors_;  // ports with a weight, in order
    size_t root_ = 0;                   // whose view holds the sum: the first contributor
    bool bf16_ = false;                 // this exchange sends bfloat16 (gradients only: parameters stay fp32)
    bool inline_ = false;
    std::vector<int> requests_;         // per bucket, across ranks
    size_t next_ = 0;                   // the next bucket to start
    std::mutex mutex_;                  // guards pending_ and failed_
    std::condition_variable changed_;
    std::vector<size_t> pending_;       // per bucket: contributions not in yet
    bool failed_ = false;
    double ms_ = 0;
};

}  // namespace lenet5
