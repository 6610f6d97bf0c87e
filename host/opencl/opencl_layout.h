// Where the parameters live on an OpenCL device: network.h's flat layout with every
// block (a layer's weights, a layer's biases) moved up to an aligned offset, so that a
// span of blocks can be its own sub-buffer: gpu-constant passes the convolution pairs'
// parameters as one __constant argument, which must be a whole buffer or sub-buffer.
// Gradients and momentum use the same layout; the padding holds zeros, so the update
// keeps it at zero.
#pragma once
#include <cstddef>
#include <vector>

#include "model/network.h"

namespace lenet5 {

class DeviceLayout {
public:
    struct Block {
        size_t host = 0, device = 0, count = 0;  // offsets in floats
    };

    // align: the device's sub-buffer alignment (CL_DEVICE_MEM_BASE_ADDR_ALIGN) in floats.
    DeviceLayout(const Network& net, size_t align);

    size_t size() const { return size_; }  // floats on the device
    const Block& weights(size_t layer) const { return blocks_.at(2 * layer); }
    const Block& bias(size_t layer) const { return blocks_.at(2 * layer + 1); }

    // Flat host layout <-> device layout (padding = 0).
    std::vector<float> to_device(const std::vector<float>& host) const;
    std::vector<float> to_host(const std::vector<float>& device) const;

private:
    std::vector<Block> blocks_;
    size_t host_size_ = 0, size_ = 0;
};

}  // namespace lenet5
