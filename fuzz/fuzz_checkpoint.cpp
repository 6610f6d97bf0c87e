// libFuzzer target: the checkpoint decoder must reject any malformed file with an
// Error, never crash, leak or over-allocate; what it accepts must re-encode to the same bytes.
#include <string>

#include "io/checkpoint.h"
#include "common/error.h"
#include "model/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    try {
        const lenet5::Checkpoint c = lenet5::decode_checkpoint(bytes, "fuzz");
        if (lenet5::encode_checkpoint(c) != bytes) __builtin_trap();
        lenet5::checkpoint_model(c, "fuzz");  // parses the model file it carries
    } catch (const lenet5::Error&) {
    }
    return 0;
}
