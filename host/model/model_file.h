// Model files (models/*.net): a network and its recommended training settings as a short
// text, one layer a line. The format, by example (models/lenet5.net has every feature):
//
//   # a comment runs to the end of the line
//   model  mlp                          the name
//   input  1x28x28 [scale=2 shift=-1]   channels x height x width (MNIST images, centred); each
//                                       byte b becomes b / 255 * scale + shift (the default: [-1, 1])
//   conv   C1 maps=32 kernel=5 stride=1 pad=2 act=relu [table]
//   maxpool P1 window=2 [stride=2] [act=none]        (avgpool alike)
//   subsample S2 window=2 act=tanh      LeCun's trainable subsampling
//   fc     F1 units=200 act=sigmoid     activations: none, tanh, sigmoid, relu
//   loss   squared                      or softmax (the default; the last layer then has act=none)
//   train  batch=1 lr=0.1 lr-decay=1 momentum=0 weight-decay=0 epochs=1
//          [schedule=step|onecycle|cosine warmup=EPOCHS nesterov label-smoothing=E]
//          [optimizer=sgd|adam|adamw beta1=B1 beta2=B2 eps=E]
//                                       as train's flags of the same names (lr-decay: step only;
//                                       momentum and nesterov: sgd only; beta1, beta2, eps: adam, adamw)
//
// A conv line ending in `table` is followed by one row per input map, one column per
// output map: `X` where the output map reads the input map, `.` where it does not.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/network.h"
#include "model/lr_schedule.h"
#include "model/optimizer.h"

namespace lenet5 {

// The `train` line: each setting the file gives (command-line flags still override).
struct TrainRecipe {
    std::optional<int> batch, epochs;
    std::optional<float> lr, lr_decay, momentum, weight_decay, warmup, label_smoothing;
    std::optional<Schedule> schedule;
    bool nesterov = false;
    std::optional<Optimizer> optimizer;
    std::optional<float> beta1, beta2, eps;
};

struct Model {
    Network net;
    TrainRecipe recipe;
    std::string text;  // the file as read, kept in checkpoints so `eval` rebuilds the network
    std::vector<float> weights;  // the parameters the source carries (an ONNX file's); empty for model files
    bool outputs_softmax = false;  // an ONNX file that ends in Softmax: its outputs are the logits' softmax
};

// The model file of `net` (without a train line): parse_model of it builds the same network.
std::string model_file_text(const Network& net);

// Throws Error "<source>:<line>: <what is wrong>" for anything malformed.
Model parse_model(const std::string& text, const std::string& source);

// The models built into the binary (models/*.net, embedded at build time): name and text.
const std::vector<std::pair<std::string, std::string>>& builtin_models();

// A built-in model's name (lenet5, mlp, cnn, vgg), else a path to a model file
// (io/model_source.h adds ONNX files).
Model load_model(const std::string& name_or_path);

}  // namespace lenet5
