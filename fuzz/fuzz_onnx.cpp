// libFuzzer target: the ONNX reader and importer (lenet5 infer, train --model FILE.onnx) must reject
// any malformed model with one Error line naming the file, never crash, hang or over-allocate; what
// they accept must be a graph whose ops read values computed before them, and a network whose
// weights fill its parameters exactly.
#include <string>

#include "common/error.h"
#include "io/onnx_import.h"
#include "io/onnx_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    try {
        const lenet5::OnnxGraph g = lenet5::parse_onnx(bytes, "fuzz", "");  // no folder: external data refused
        std::vector<bool> ready(g.values.size(), false);
        ready[static_cast<size_t>(g.input)] = true;
        for (const auto& op : g.ops) {
            if (!ready[static_cast<size_t>(op.in)] || (op.in2 >= 0 && !ready[static_cast<size_t>(op.in2)])) __builtin_trap();
            ready[static_cast<size_t>(op.out)] = true;
        }
        if (!ready[static_cast<size_t>(g.output)]) __builtin_trap();
        const lenet5::Model m = lenet5::import_onnx(g, "fuzz");
        if (m.weights.size() != m.net.param_count) __builtin_trap();
    } catch (const lenet5::Error& e) {
        const std::string what = e.what();
        if (what.rfind("fuzz", 0) != 0 || what.find('\n') != std::string::npos) __builtin_trap();
    }
    return 0;
}
