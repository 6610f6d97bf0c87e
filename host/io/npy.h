// NumPy .npy files of float32 (the inputs and outputs of `lenet5 infer`): format versions 1.0
// to 3.0, little-endian '<f4', C order, any rank. Anything else is refused with one line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lenet5 {

struct NpyArray {
    std::vector<int64_t> shape;
    std::vector<float> data;  // row-major, the product of shape floats
};

// Parses the bytes of an .npy file; `name` (the file) starts every Error's message.
NpyArray parse_npy(const std::string& bytes, const std::string& name);

// Reads and parses `path`; Error naming the file when it cannot be read or is malformed.
NpyArray read_npy(const std::string& path);

// The bytes of a version 1.0 .npy file holding `array` ('<f4', C order).
std::string npy_bytes(const NpyArray& array);

}  // namespace lenet5
