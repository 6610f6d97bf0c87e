// libFuzzer target: the model-file parser must reject any malformed text with one Error
// line naming the file, never crash, hang or over-allocate; what it accepts must describe
// a network whose layers chain and whose parameters fit the flat layout.
#include <string>

#include "common/error.h"
#include "model/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const lenet5::Network net = lenet5::parse_model(text, "fuzz").net;
        size_t params = 0;
        lenet5::Shape in = net.input;
        for (const auto& l : net.layers) {
            if (l.in.c != in.c || l.in.h != in.h || l.in.w != in.w || l.out.size() <= 0) __builtin_trap();
            if (l.weight_offset != params || l.bias_offset != l.weight_offset + l.weight_count) __builtin_trap();
            params = l.bias_offset + l.bias_count;
            in = l.out;
        }
        if (params != net.param_count || net.classes != in.size()) __builtin_trap();
    } catch (const lenet5::Error& e) {
        const std::string what = e.what();
        if (what.rfind("fuzz", 0) != 0 || what.find('\n') != std::string::npos) __builtin_trap();
    }
    return 0;
}
