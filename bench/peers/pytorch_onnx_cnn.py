#!/usr/bin/python3
"""A small MNIST CNN made in PyTorch and exported to ONNX, the peer of `lenet5 train --model FILE.onnx`.

  pytorch_onnx_cnn.py make OUT.onnx [--seed S] [--data DIR --images N --x X.npy --y Y.npy]
      builds the CNN with torch.manual_seed(S) (default 1), exports it with torch.onnx.export
      (opset 13, input 'image' N x 1 x 28 x 28, the pixels in [0, 1] as torchvision's ToTensor gives
      them) and, with --x/--y, writes the first N test images and PyTorch's outputs on them as .npy.
  pytorch_onnx_cnn.py train [--seed S] [--shuffle-seed T] [--data DIR] [--train-limit N] [--test-limit N]
                            [--epochs E] [--batch B] [--lr X] [--momentum M] [--weight-decay W]
      trains the same CNN from the same seeded weights with lenet5-cl's recipe (SGD with momentum,
      v = m*v + g + wd*p; p -= lr*v; mean softmax cross-entropy; each epoch's rate lr * 0.8^(e-1);
      a fresh shuffle each epoch, or with --lenet5-order S exactly lenet5's of --seed S) and prints one
      JSON line per epoch: loss and test accuracy.

The network: conv 5x5 8 maps ReLU, max pool 2, conv 3x3 16 maps ReLU, max pool 2, flatten,
fully connected 32 ReLU, fully connected 10 (14,538 parameters).
Needs /usr/bin/python3 with torch (Debian python3-torch) and numpy. Exit status: 0 ok, 1 failure,
3 torch missing.
"""
import argparse
import json
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.stderr.write("pytorch_onnx_cnn: torch or numpy not installed (apt-get install python3-torch python3-numpy)\n")
    sys.exit(3)
sys.dont_write_bytecode = True
import mnist_idx  # noqa: E402  (bench/peers/mnist_idx.py)


def cnn(seed):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 8, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 5 * 5, 32), nn.ReLU(), nn.Linear(32, 10))


def pixels(directory, prefix, limit):
    """The images as N x 1 x 28 x 28 floats byte / 255, and the labels."""
    x, labels = mnist_idx.load_scaled(directory, prefix, limit)  # byte / 127.5 - 1
    images = mnist_idx.read_idx(directory, prefix + "-images-idx3-ubyte")[:len(labels)]
    return torch.from_numpy(images.astype(np.float32) / np.float32(255.0)).unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


def lenet5_order(n, seed, epoch):
    """lenet5-cl's shuffle of epoch `epoch` (host/common/rng.h, trainer.cpp): SplitMix64 from
    seed * 0x9E3779B97F4A7C15 + epoch, then Fisher-Yates with multiply-shift draws."""
    mask = (1 << 64) - 1
    state = (seed * 0x9E3779B97F4A7C15 + epoch) & mask
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        j = ((z >> 32) * (i + 1)) >> 32
        order[i], order[j] = order[j], order[i]
    return torch.tensor(order)


def make(a):
    model = cnn(a.seed).eval()
    torch.onnx.export(model, torch.zeros(1, 1, 28, 28), a.out, opset_version=13, input_names=["image"],
                      output_names=["logits"], dynamic_axes={"image": {0: "N"}, "logits": {0: "N"}})
    if a.x:
        x, _ = pixels(a.data, "t10k", a.images)
        np.save(a.x, x.numpy())
        with torch.no_grad():
            np.save(a.y, model(x).numpy())


def train(a):
    torch.set_num_threads(2)
    model = cnn(a.seed)
    x, y = pixels(a.data, "train", a.train_limit)
    tx, ty = pixels(a.data, "t10k", a.test_limit)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)
    gen = torch.Generator().manual_seed(a.seed if a.shuffle_seed is None else a.shuffle_seed)
    for epoch in range(1, a.epochs + 1):
        for g in opt.param_groups:
            g["lr"] = a.lr * 0.8 ** (epoch - 1)
        order = lenet5_order(len(y), a.lenet5_order, epoch) if a.lenet5_order is not None else \
            torch.randperm(len(y), generator=gen)
        total, model = 0.0, model.train()
        for first in range(0, len(y), a.batch):
            idx = order[first:first + a.batch]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        with torch.no_grad():
            acc = (model.eval()(tx).argmax(1) == ty).float().mean().item()
        print(json.dumps({"epoch": epoch, "train_loss": total / len(y), "test_accuracy": acc}), flush=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    data = os.environ.get("LENET5_DATA", os.path.join(here, "..", "..", "data", "mnist"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--images", type=int, default=8)
    m.add_argument("--x")
    m.add_argument("--y")
    t = sub.add_parser("train")
    t.add_argument("--train-limit", type=int, default=6000)
    t.add_argument("--test-limit", type=int, default=10000)
    t.add_argument("--epochs", type=int, default=1)
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--lr", type=float, default=0.05)
    t.add_argument("--momentum", type=float, default=0.9)
    t.add_argument("--weight-decay", type=float, default=0.0005)
    t.add_argument("--shuffle-seed", type=int, default=None, help="the shuffles' seed (default: --seed)")
    t.add_argument("--lenet5-order", type=int, default=None, metavar="SEED",
                   help="shuffle exactly as `lenet5 train --seed SEED` does (same batches, same order)")
    for p in (m, t):
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--data", default=data)
    a = ap.parse_args()
    try:
        make(a) if a.cmd == "make" else train(a)
    except mnist_idx.IdxError as e:
        sys.stderr.write("pytorch_onnx_cnn: error: %s\n" % e)
        sys.exit(1)


if __name__ == "__main__":
    main()
