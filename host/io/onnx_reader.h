// Reads an ONNX model (the ONNX project's generated protobuf classes, libonnx-dev) into an
// OnnxGraph: the operators of `lenet5 infer` (Conv, grouped too, Relu, Sigmoid, Tanh, MaxPool,
// AveragePool, GlobalAveragePool, Gemm, MatMul, Add, Sub, Mul, Div by constants, Pad, Flatten,
// Reshape, Softmax, Identity, Constant, and the layer kinds' own operators, layers/layer_type.h)
// over one float input whose first dimension is the batch, initializers inline or as external
// data in files beside the model. Shapes are inferred node by node; an unsupported operator,
// a malformed file, shapes that do not chain or absurd dimensions are an Error of one line that
// starts with the file's name (and names the node and operator where one is at fault).
#pragma once
#include <string>

#include "io/onnx_graph.h"

namespace lenet5 {

// `bytes`: the model file's content; `name`: the file, for messages; `dir`: the folder that
// external data is read from ("" refuses external data).
OnnxGraph parse_onnx(const std::string& bytes, const std::string& name, const std::string& dir);

// Reads `path` (external data from its folder).
OnnxGraph read_onnx(const std::string& path);

}  // namespace lenet5
