// What every host variant does at the two ends of the network: turning an MNIST
// image into the input tensor, and the loss of the outputs (softmax cross-entropy of
// the logits, or the squared error against the one-hot label).
// The OpenCL kernels do the same arithmetic in cl_kernels/.
#pragma once
#include <cmath>
#include <cstdint>

#include "model/network.h"

namespace lenet5 {

// A rows x cols byte image, centred in the input's h x w (one channel), each pixel as `scaling`
// gives it (by default [-1, 1]), the border at a 0 byte's value (the background).
inline void image_to_input(const uint8_t* image, int rows, int cols, const Shape& input, const InputScaling& scaling,
                           float* out) {
    const int top = (input.h - rows) / 2, left = (input.w - cols) / 2;
    for (int i = 0; i < input.h * input.w; ++i) out[i] = scaling.value(0);
    for (int y = 0; y < rows; ++y)
        for (int x = 0; x < cols; ++x) out[(top + y) * input.w + left + x] = scaling.value(image[y * cols + x]);
}

// image_to_input of n images (bit for bit) into one lane group (engine/lane_groups.h): the input
// tensor [h][w][lanes], lanes n.. zero; `pixel` holds scaling.value(b) for each byte b.
inline void images_to_lanes(const uint8_t* const* images, int n, int lanes, int rows, int cols, const Shape& input,
                            const float* pixel, float* group) {
    const int top = (input.h - rows) / 2, left = (input.w - cols) / 2;
    for (int y = 0; y < input.h; ++y)
        for (int x = 0; x < input.w; ++x) {  // the group's vector of a position, written once
            float* dst = group + (y * input.w + x) * lanes;
            const int iy = y - top, ix = x - left;
            if (iy >= 0 && iy < rows && ix >= 0 && ix < cols)
                for (int s = 0; s < n; ++s) dst[s] = pixel[images[s][iy * cols + ix]];
            else
                for (int s = 0; s < n; ++s) dst[s] = pixel[0];
            for (int s = n; s < lanes; ++s) dst[s] = 0.0f;
        }
}

// Softmax cross-entropy of one sample. Writes dLoss/dlogits scaled by `scale` (1/batch for a mean
// loss) against the target (1 - smoothing) on the label plus smoothing/n on every output (the
// one-hot label without smoothing), returns the loss against the label itself; `correct` when the
// arg-max is the label (the first maximum wins ties).
inline float softmax_cross_entropy(const float* logits, int n, int label, float smoothing, float scale,
                                   float* dlogits, bool& correct) {
    int best = 0;
    for (int k = 1; k < n; ++k)
        if (logits[k] > logits[best]) best = k;
    const float mx = logits[best];
    float sum = 0.0f;
    for (int k = 0; k < n; ++k) sum += std::exp(logits[k] - mx);
    const float off = smoothing / static_cast<float>(n), on = (1.0f - smoothing) + off;
    for (int k = 0; k < n; ++k) dlogits[k] = scale * (std::exp(logits[k] - mx) / sum - (k == label ? on : off));
    correct = best == label;
    return std::log(sum) - (logits[label] - mx);
}

// 0.5 * sum_k (y_k - t_k)^2 against the one-hot label t; writes scale * (y - t).
inline float squared_error(const float* y, int n, int label, float scale, float* dy, bool& correct) {
    int best = 0;
    float loss = 0.0f;
    for (int k = 0; k < n; ++k) {
        if (y[k] > y[best]) best = k;
        const float e = y[k] - (k == label ? 1.0f : 0.0f);
        loss += 0.5f * e * e;
        dy[k] = scale * e;
    }
    correct = best == label;
    return loss;
}

// The network's loss of one sample's outputs (smoothing: softmax cross-entropy's label smoothing).
inline float sample_loss(Loss loss, const float* outputs, int n, int label, float smoothing, float scale,
                         float* doutputs, bool& correct) {
    return loss == Loss::SquaredError ? squared_error(outputs, n, label, scale, doutputs, correct)
                                      : softmax_cross_entropy(outputs, n, label, smoothing, scale, doutputs, correct);
}

}  // namespace lenet5
