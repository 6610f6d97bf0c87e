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

class ExchangePort {
public:
    virtual ~ExchangePort() = default;

    // `ready(layer)` is called by the engine's backward() on its own thread as each layer's
    // gradients become final, the last layer first; an empty function stops it. Returns false
    // where backward() never calls it (device engines): the exchange then fetches every layer
    // once backward() has returned.
    virtual bool listen(std::function<void(size_t layer)> ready) = 0;

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
