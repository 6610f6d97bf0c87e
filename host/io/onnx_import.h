// A model from an ONNX file: the graph the reader builds (onnx_reader.h) as the Network every engine
// runs, trains (`train --model FILE.onnx`) and infers with (`infer --onnx FILE`), with the file's weights.
//
// What it takes: one chain of Conv (square kernel, equal strides and padding; groups become a
// connection table), MaxPool and AveragePool (square, unpadded), Gemm/MatMul, Relu/Sigmoid/Tanh,
// Flatten/Reshape, over one input of C x H x W values (or a vector; 784 values are the flattened 28x28
// image), and an optional Softmax at the end. Before the first layer the graph may scale its input
// (Mul/Add/Sub/Div by one number each: as `export` writes it, the input is the pixels in [0, 1]) and
// pad a one-map image evenly with the background (a 0 pixel's value); constants per map or unit after
// a Conv or Gemm fold into it. Without a Softmax, a last layer with no activation gives logits for the
// softmax loss, one with an activation the squared error. A file `lenet5 export` wrote carries its
// model file (metadata lenet5.model): its connection tables, trainable subsampling and training recipe
// come back with it. Anything else is an Error of one line naming the file, and the node and operator
// where one is at fault.
#pragma once
#include <string>

#include "io/onnx_graph.h"
#include "model/model_file.h"

namespace lenet5 {

// `source`: the file, for messages and the network's name. The Model's weights are the file's.
Model import_onnx(const OnnxGraph& graph, const std::string& source);
// import_onnx, refusing what MNIST and Fashion-MNIST cannot feed: an input other than 1 x H x W
// images (H, W at least 28) or 784 values, or other than 10 outputs.
Model import_onnx_for_training(const OnnxGraph& graph, const std::string& source);

// Read `path`, then import_onnx / import_onnx_for_training.
Model read_onnx_model(const std::string& path);
Model read_onnx_model_for_training(const std::string& path);

}  // namespace lenet5
