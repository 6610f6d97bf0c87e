// Checkpoints: the model and everything needed to continue training exactly.
//
// File format (version 2, or 3 under Adam; all integers and floats little-endian):
//   header    8 bytes  magic "LENET5CK"
//             u32      format version (2 or 3; version 1, without the model file, still loads as LeNet-5)
//   network   u64      hash of the network description (Network::hash)
//             u32      length L of the description, then L bytes of it (Network::describe)
//             u32      length M of the model file, then M bytes of it (version 2 only)
//   training  u32      epochs completed
//             u32      steps completed of the next epoch (non-zero after an interrupt)
//             u64      seed (the shuffles of every epoch derive from it)
//             u64      state of the next epoch's shuffle generator
//             u32      batch size, f32 learning rate, f32 momentum
//   tensors   u64      parameter count N
//             N x f32  parameters (the flat layout of network.h)
//             N x f32  momentum buffer (Adam: the first moment)
//   adam      u32      (version 3 only) the optimizer: 1 Adam, 2 AdamW
//             u64      updates so far (bias correction's t)
//             N x f32  second moment
//   trailer   u32      CRC-32 (zlib) of every byte before it
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/network.h"
#include "update_rule.h"

namespace lenet5 {

struct Checkpoint {
    uint64_t network_hash = 0;
    std::string network_description;
    std::string model_text;  // the model file the network was read from (empty in version 1)
    uint32_t epoch = 0, step = 0;
    uint64_t seed = 0, rng_state = 0;
    uint32_t batch = 0;
    float lr = 0, momentum = 0;
    std::vector<float> params, velocity;
    Optimizer optimizer = Optimizer::Sgd;
    uint64_t adam_steps = 0;
    std::vector<float> second;  // Adam's second moment
};

constexpr uint32_t kCheckpointVersion = 2, kAdamCheckpointVersion = 3;

std::string encode_checkpoint(const Checkpoint& c);
// Throws Error naming `source` (the file) for any defect: bad magic, other version,
// truncated section, CRC mismatch, trailing bytes.
Checkpoint decode_checkpoint(const std::string& bytes, const std::string& source);

// Atomic save (temporary file, fsync, rename) and load.
void save_checkpoint(const std::string& path, const Checkpoint& c);
Checkpoint load_checkpoint(const std::string& path);

// Throws Error unless the checkpoint was made for `net`.
void check_network(const Checkpoint& c, const Network& net, const std::string& path);

struct Model;
// The model the checkpoint was trained with (its model file; LeNet-5 for version 1),
// checked against the checkpoint's network. `path` names the file in errors.
Model checkpoint_model(const Checkpoint& c, const std::string& path);

}  // namespace lenet5
