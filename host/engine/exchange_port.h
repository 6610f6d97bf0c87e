// How the exchange (train/grad_exchange.h) reaches one engine's gradients or parameters without
// copying them through fresh host vectors: a flat host view of each (network.h's layout) that it
// reads and overwrites in place, one bucket at a time. A bucket is one layer's parameters, its
// weights then its biases. A host engine's view is its own storage; a device engine's is a mirror
// in pinned host memory that fetch() reads into and store() writes from, a bucket per command
// pair (its weights' block and its biases' block of the device layout).
#pragma once
#include <cstddef>
#include <functional>

namespace lenet5 {

enum class FlatBuffer { Gradients, Params };

// What a host engine's backward() tells the exchange while it runs, on backward()'s own thread.
struct BackwardListener {
    std::function<void(size_t layer)> ready;  // the layer's gradients are final (the last layer first)
    // Called every few samples of the layers below the announced ones, so that the buckets already
    // sent move on meanwhile (MPI progresses only inside its calls).
    std::function<void()> progress;
};

class ExchangePort {
public:
    virtual ~ExchangePort() = default;

    // From now on backward() calls `listener` (an empty one stops it): a host engine as it
    // completes each layer; the batch-level OpenCL engine once each layer's bucket, read on a side
    // queue as soon as the device has produced it, is in its mirror. Returns false where backward()
    // never does (the per-sample OpenCL engine, whose one launch produces every layer's gradients):
    // the exchange then fetches every layer once backward() has returned.
    virtual bool listen(BackwardListener listener) = 0;

    // The flat host view of `which` (param_count floats); the pointer stays valid for the
    // engine's life.
    virtual float* flat(FlatBuffer which) = 0;
    // Starts bringing `layer`'s bucket of `which` into the view (a device engine's read; the last
    // backward's gradients or the current parameters); fetched() waits for it.
    virtual void fetch(FlatBuffer which, size_t layer) = 0;
    virtual void fetched(FlatBuffer which, size_t layer) = 0;
    // Starts sending `layer`'s bucket of the view back to where the engine computes (a device
    // engine's write); stored() waits for every such write and tells the engine that `which`
    // changed, so that update() or the next forward() uses the new values.
    virtual void store(FlatBuffer which, size_t layer) = 0;
    virtual void stored(FlatBuffer which) = 0;
};

}  // namespace lenet5
