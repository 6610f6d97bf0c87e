// libFuzzer target: the ONNX reader (lenet5 infer) must reject any malformed model with one Error
// line naming the file, never crash, hang or over-allocate; what it accepts must be a graph whose
// ops read values computed before them, and whose slots never hand an op's output the buffer of
// one of its inputs (a Reshape alone shares its input's).
#include <string>

#include "common/error.h"
#include "io/onnx_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    try {
        const lenet5::InferGraph g = lenet5::parse_onnx(bytes, "fuzz", "");  // no folder: external data refused
        std::vector<bool> ready(g.values.size(), false);
        ready[static_cast<size_t>(g.input)] = true;
        for (const auto& op : g.ops) {
            if (!ready[static_cast<size_t>(op.in)] || (op.in2 >= 0 && !ready[static_cast<size_t>(op.in2)])) __builtin_trap();
            const bool shares = g.slot_of[op.out] == g.slot_of[op.in] || (op.in2 >= 0 && g.slot_of[op.out] == g.slot_of[op.in2]);
            if (shares != (op.kind == lenet5::InferOpKind::Reshape)) __builtin_trap();
            if (g.values[op.out].size() > g.slot_floats[g.slot_of[op.out]]) __builtin_trap();
            ready[static_cast<size_t>(op.out)] = true;
        }
        if (!ready[static_cast<size_t>(g.output)]) __builtin_trap();
    } catch (const lenet5::Error& e) {
        const std::string what = e.what();
        if (what.rfind("fuzz", 0) != 0 || what.find('\n') != std::string::npos) __builtin_trap();
    }
    return 0;
}
