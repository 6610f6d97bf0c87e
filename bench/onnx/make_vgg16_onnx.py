#!/usr/bin/python3
"""Makes the ONNX models of `lenet5 infer` (issue 13) with seeded random weights.

  bench/onnx/make_vgg16_onnx.py vgg16 OUT.onnx [--seed S]
      VGG16 as torchvision builds it (13 3x3 convolutions + ReLU, 5 max poolings, 25088-4096-4096-1000),
      its weights from torch.manual_seed(S) (default 1), about 553 MB: never committed; made
      where it is needed (on the GPU machine too: files over 64 MiB cannot be carried).
  bench/onnx/make_vgg16_onnx.py small OUT.onnx [--seed S]
      a small VGG-shaped model for the tests (3x32x32 input, convolutions with padding 1 and
      ReLU, max and average pooling, a flatten, fully connected layers, about 100 K weights).
  bench/onnx/make_vgg16_onnx.py torch-run vgg16|small X.npy Y.npy [--seed S] [--batch B] [--repeats R]
      runs the same model (rebuilt from the seed) in PyTorch on X and writes Y; with CUDA
      (strict fp32: no TF32, cuDNN deterministic) when present. Prints one JSON line of timings.

Needs python3 with torch (Debian python3-torch) and numpy;
torch.onnx.export works without the onnx Python package.
"""
import argparse
import inspect
import json
import sys
import time

import numpy as np
import torch
import torch.nn as nn


def small_model():
    """VGG in miniature: every operator kind VGG16's export has (Conv, Relu, MaxPool, the
    AveragePool of the adaptive pooling, Flatten, Gemm), and a stride-2 convolution."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2, 2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d((2, 2)),
        nn.Flatten(),
        nn.Linear(16 * 2 * 2, 64), nn.ReLU(), nn.Dropout(),
        nn.Linear(64, 10))


def vgg16():
    """torchvision.models.vgg16() layer for layer, with its initialisation (Kaiming-normal
    convolutions, N(0, 0.01) fully connected layers, zero biases); written out here so that
    the script needs torch only (this machine's Debian python3 has no torchvision)."""
    layers, maps = [], 3
    for v in [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(maps, v, 3, padding=1), nn.ReLU(inplace=True)]
            maps = v
    model = nn.Sequential(
        nn.Sequential(*layers), nn.AdaptiveAvgPool2d((7, 7)), nn.Flatten(),
        nn.Sequential(nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(),
                      nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(), nn.Linear(4096, 1000)))
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.zeros_(m.bias)
    return model


def make(kind, seed):
    torch.manual_seed(seed)
    if kind == "vgg16":
        model = vgg16()
        shape = (3, 224, 224)
    elif kind == "small":
        model = small_model()
        # Weights large enough that the outputs differ clearly between classes.
        with torch.no_grad():
            for p in model.parameters():
                p.uniform_(-0.3, 0.3)
        shape = (3, 32, 32)
    else:
        sys.exit(f"make_vgg16_onnx: unknown model '{kind}' (vgg16, small)")
    return model.eval(), shape


def export(kind, out, seed):
    model, shape = make(kind, seed)
    x = torch.zeros((1,) + shape)
    # The TorchScript exporter where torch has both: the newer (dynamo) one exports at opset 18 and
    # fails to convert down to 13.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, x, out, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=13, **legacy)


def torch_run(kind, x_path, y_path, seed, batch, repeats):
    model, _ = make(kind, seed)
    cuda = torch.cuda.is_available()
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda" if cuda else "cpu")
    model = model.to(dev)
    x = torch.from_numpy(np.load(x_path)).to(dev)
    outs, times = [], []
    with torch.no_grad():
        for r in range(repeats + 1):  # the first pass is a warm-up (cuDNN's choice of algorithms)
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            outs = [model(x[i:i + batch]) for i in range(0, x.shape[0], batch)]
            if cuda:
                torch.cuda.synchronize()
            if r:
                times.append((time.perf_counter() - start) * 1000 / x.shape[0])
    np.save(y_path, torch.cat(outs).float().cpu().numpy())
    times.sort()
    print(json.dumps({"peer": "pytorch", "version": torch.__version__,
                      "device": torch.cuda.get_device_name() if cuda else "cpu", "images": int(x.shape[0]),
                      "batch": batch, "repeats": repeats, "ms_per_image": times[len(times) // 2],
                      "ms_per_image_all": times}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["vgg16", "small", "torch-run"])
    ap.add_argument("args", nargs="+")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    if a.what == "torch-run":
        if len(a.args) != 3:
            sys.exit("make_vgg16_onnx: torch-run needs MODEL X.npy Y.npy")
        torch_run(a.args[0], a.args[1], a.args[2], a.seed, a.batch, a.repeats)
    else:
        export(a.what, a.args[0], a.seed)


if __name__ == "__main__":
    main()
