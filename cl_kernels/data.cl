// The data sets: converted once when uploaded, gathered per batch (compiled after common.h).

// images [n][rows][cols] bytes -> inputs [n][H][W], each image centred, the border at -1 (background).
// value [256]: the host's byte -> [-1, 1] conversion (p / 127.5 - 1, preprocess.h), so the device
// uses exactly the host's floats rather than its own division.
// NDRange (round_up(H*W, WG), n): one item per input pixel.
__kernel void images_to_inputs(__global const uchar* images, int rows, int cols, __global const float* value,
                               __global float* inputs, int H, int W) {
    const int e = (int)get_global_id(0), s = (int)get_global_id(1);
    if (e >= H * W) return;
    const int y = e / W - (H - rows) / 2, x = e % W - (W - cols) / 2;
    const bool inside = y >= 0 && y < rows && x >= 0 && x < cols;
    inputs[(size_t)s * H * W + e] = inside ? value[images[((size_t)s * rows + y) * cols + x]] : -1.0f;
}

// The batch of a step: sample s is data set row rows[first + s] (the epoch's order for training,
// the identity for the test set), copied so that every layer kernel reads plain [count][...] tensors.
// inputs [n][size], labels [n] -> batch_in [count][size], batch_labels [count].
// NDRange (round_up(size, WG), count): one item per input element; item 0 also copies the label.
__kernel void gather_batch(__global const float* inputs, __global const uchar* labels, __global const int* rows,
                           int first, int size, __global float* batch_in, __global uchar* batch_labels) {
    const int e = (int)get_global_id(0), s = (int)get_global_id(1);
    if (e >= size) return;
    const size_t row = (size_t)rows[first + s];
    batch_in[(size_t)s * size + e] = inputs[row * size + e];
    if (e == 0) batch_labels[s] = labels[row];
}
