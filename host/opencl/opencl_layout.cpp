#include "opencl/opencl_layout.h"

#include <algorithm>

namespace lenet5 {

DeviceLayout::DeviceLayout(const Network& net, size_t align) : host_size_(net.param_count) {
    align = std::max<size_t>(align, 1);
    for (const auto& l : net.layers)
        for (const auto& [offset, count] : {std::pair{l.weight_offset, l.weight_count}, {l.bias_offset, l.bias_count}}) {
            blocks_.push_back({offset, size_, count});
            size_ += (count + align - 1) / align * align;
        }
}

std::vector<float> DeviceLayout::to_device(const std::vector<float>& host) const {
    std::vector<float> device(size_, 0.0f);
    for (const auto& b : blocks_)
        std::copy_n(host.begin() + static_cast<std::ptrdiff_t>(b.host), b.count,
                    device.begin() + static_cast<std::ptrdiff_t>(b.device));
    return device;
}

std::vector<float> DeviceLayout::to_host(const std::vector<float>& device) const {
    std::vector<float> host(host_size_);
    for (const auto& b : blocks_)
        std::copy_n(device.begin() + static_cast<std::ptrdiff_t>(b.device), b.count,
                    host.begin() + static_cast<std::ptrdiff_t>(b.host));
    return host;
}

}  // namespace lenet5
