// The list of layer kinds: one name per home in host/model/layers/ (layer_type.h says what a home holds,
// registry.cpp lists them). Adding a kind starts here: docs/adding-a-layer.md walks through it.
#pragma once

namespace lenet5 {

enum class LayerKind {
    Conv,            // KxK convolution with a stride and zero padding, over the input maps its connection list names
    Subsample,       // KxK non-overlapping sum, times one trainable coefficient per map, plus a bias
    FullyConnected,  // out = W in + b, W is [out][in]
    MaxPool,         // KxK window with a stride: the largest input (no parameters)
    AvgPool,         // KxK window with a stride: the mean of the inputs (no parameters)
    Dropout,         // in training, each input kept with probability 1 - rate and scaled by 1/(1 - rate)
};

}  // namespace lenet5
