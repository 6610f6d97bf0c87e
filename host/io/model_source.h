// Where a --model comes from: a built-in model's name or a model file (model_file.h), or an
// ONNX file (a path ending in .onnx; onnx_import.h), whose weights come with it, shaped for MNIST.
#pragma once
#include <string>

#include "model/model_file.h"

namespace lenet5 {

Model open_model(const std::string& name_or_path);

}  // namespace lenet5
