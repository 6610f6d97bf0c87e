// The data sets, converted once when uploaded (compiled after common.h); step.cl's kernels read
// a batch's samples from them through the rows of the batch.

// images [n][rows][cols] bytes -> inputs [n][H][W], each image centred, the border at value[0] (the
// background). value [256]: the host's byte -> input conversion (InputScaling, preprocess.h; by
// default p / 127.5 - 1), so the device uses exactly the host's floats rather than its own division.
// NDRange (round_up(H*W, WG), n), work-group (WG, 1): one item per input pixel.
__kernel void images_to_inputs(__global const uchar* images, int rows, int cols, __global const float* value,
                               __global float* inputs, int H, int W) {
    const int e = (int)get_global_id(0), s = (int)get_global_id(1);
    if (e >= H * W) return;
    const int y = e / W - (H - rows) / 2, x = e % W - (W - cols) / 2;
    const bool inside = y >= 0 && y < rows && x >= 0 && x < cols;
    inputs[(size_t)s * H * W + e] = inside ? value[images[((size_t)s * rows + y) * cols + x]] : value[0];
}
