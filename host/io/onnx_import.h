// A trainable model from an ONNX file (`train --model FILE.onnx`): the graph that `lenet5 infer`
// reads (onnx_reader.h), as the Network every engine trains, with the file's weights.
//
// What trains: one chain of Conv (square kernel, equal strides and padding, one group), MaxPool
// and AveragePool (square, unpadded), Gemm/MatMul, Relu/Sigmoid/Tanh, Flatten/Reshape, over one input
// of 1 x H x W images (or 784 values: the flattened 28x28 image), and an optional Softmax at the end.
// Before the first layer the graph may scale the pixels (Mul/Add/Sub/Div by one number each: the
// input is the pixels in [0, 1], as `export` writes it; without them, training feeds those pixels)
// and pad the 28x28 image evenly with the background (a 0 pixel's value). Without a Softmax, a last
// layer with no activation gives logits for the softmax loss, one with an activation the squared error.
// A file `lenet5 export` wrote carries its model file (metadata lenet5.model): its connection tables,
// trainable subsampling and training recipe come back with it. Anything else is an Error of one line
// naming the file, and the node and operator where one is at fault.
#pragma once
#include <string>

#include "infer/infer_graph.h"
#include "model/model_file.h"

namespace lenet5 {

// `source`: the file, for messages and the network's name. The Model's weights are the file's.
Model import_onnx(const InferGraph& graph, const std::string& source);

// Reads and imports `path`.
Model read_onnx_model(const std::string& path);

}  // namespace lenet5
