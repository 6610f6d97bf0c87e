// `lenet5 export`: a trained network as an ONNX model (opset 13, standard operators only),
// built with the ONNX project's generated protobuf classes and checked by its checker.
//
// The graph, for any network the model files describe:
//   input  "image"  float [N, 1, rows, cols]: the raw pixels scaled to [0, 1] (byte / 255),
//                   as torchvision's ToTensor gives them. The preprocessing of preprocess.h is
//                   in the graph: x * scale + shift (by default x * 2 - 1 = byte / 127.5 - 1, bit
//                   for bit), then a Pad with the shift (the background) centring the image in the
//                   network's input (LeNet-5's 32x32).
//   conv        Conv [maps, in maps, K, K]; a connection table (LeNet-5's C3) is a full Conv
//               whose kernels for the pairs the table leaves out are zero
//   subsample   a depthwise Conv (group = maps, stride K) whose KxK kernel of map c is all
//               coefficient[c], plus bias[c]: coefficient x the window's sum + bias
//   max/avgpool MaxPool / AveragePool (no padding, floor)
//   fc          Flatten (C, H, W order, as our layout) then Gemm with transB (W is [out][in]);
//               a window layer after it first Reshapes the [N, units] back to [N, units, 1, 1]
//   activation  Tanh, Sigmoid or Relu after the layer
//   output "logits" [N, classes] for a softmax model (the scores before the softmax, as the
//          engines' forward gives them; the prediction is the arg-max), or "outputs" [N, classes]
//          for a squared-error model (the MLP's sigmoid outputs; the prediction is the arg-max).
//          The loss is not part of the graph.
//   metadata lenet5.model: the model file, which `train --model FILE.onnx` reads (onnx_import.h)
#pragma once
#include <string>
#include <vector>

#include "model/network.h"

namespace onnx {
class ModelProto;
}

namespace lenet5 {

// The ONNX model of `net` with parameters `params` (the flat layout of network.h), fed
// rows x cols images (MNIST's 28x28). Throws Error when the network cannot take such images
// (more than one input channel, an input smaller than the image).
onnx::ModelProto onnx_model(const Network& net, const std::vector<float>& params, int rows = 28, int cols = 28);

// `lenet5 export --model CHECKPOINT --onnx FILE`: loads the checkpoint, builds its model,
// checks it with onnx::checker and writes it through write_file_atomic. Returns the summary
// line printed to stdout. Throws Error naming the file on any failure.
std::string export_checkpoint(const std::string& checkpoint_path, const std::string& onnx_path);

}  // namespace lenet5
