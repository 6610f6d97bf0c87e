#!/usr/bin/env python3
"""PyTorch peer of lenet5-cl for models/mlp.net, models/cnn.net and models/vgg.net: the same network,
trained the same way, timed per epoch.

  mlp  1x28x28 -> FC 200 sigmoid -> FC 10 sigmoid; squared error
       0.5 * sum((y - onehot)^2) per sample, summed over the batch and divided by it.
       Recipe: batch 1, lr 0.1, momentum 0, weight decay 0, no lr decay, 1 epoch.
  cnn  1x28x28 -> conv 5x5 32 maps pad 2 ReLU -> max pool 2 -> FC 1024 ReLU -> FC 10;
       softmax cross-entropy, mean over the batch.
       Recipe: batch 64, lr 0.02 (x0.8 after every epoch), momentum 0.9,
       weight decay 5e-4, 5 epochs.
  vgg  1x28x28 -> 2x (conv 3x3 32 maps pad 1 ReLU) -> max pool 2 -> 2x (conv 3x3 64 pad 1 ReLU)
       -> max pool 2 -> FC 256 ReLU -> FC 10; softmax cross-entropy.
       Recipe: batch 256, lr 0.02 (x0.8 after every epoch), momentum 0.9, weight decay 5e-4, 3 epochs.

Inputs are MNIST's 28x28 pixels scaled p/127.5 - 1 (no padding for these models).
Update: torch.optim.SGD (dampening 0, not Nesterov), which is lenet5-cl's
v = m*v + g + wd*p; p -= lr*v; the rate of epoch e is lr * lr_decay^(e-1).
Initialisation follows host/model/network.cpp's rule (uniform +-sqrt(3/fan_in), or
+-sqrt(6/fan_in) for ReLU layers; biases 0) but not its random stream.
The flags --batch, --lr, --lr-decay, --momentum, --weight-decay and --epochs
override the model's recipe.

The whole data set is converted once and held on the device; each epoch shuffles
with torch.randperm on the device and gathers batches from the resident tensors.
Output: one JSON object per epoch on stdout, then a summary line.
Exit status: 0 ok, 1 failure, 2 usage error, 3 torch missing (benchmark: skip).
"""

import argparse
import json
import os
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.stderr.write("pytorch_models: torch not installed "
                     "(apt-get install python3-torch, use /usr/bin/python3)\n")
    sys.exit(3)
try:
    import numpy as np
except ImportError:
    sys.stderr.write("pytorch_models: numpy not installed (apt-get install python3-numpy)\n")
    sys.exit(3)
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
import mnist_idx   # bench/peers/mnist_idx.py: the IDX reader shared with pytorch_lenet5.py

# The models as models/*.net describes them. Layers: ("conv", maps, kernel, pad, act),
# ("maxpool", window), ("fc", units, act). "train" is the file's recipe line.
MODELS = {
    "mlp": {
        "layers": [("fc", 200, "sigmoid"), ("fc", 10, "sigmoid")],
        "loss": "squared",
        "train": {"batch": 1, "lr": 0.1, "lr_decay": 1.0, "momentum": 0.0,
                  "weight_decay": 0.0, "epochs": 1},
    },
    "cnn": {
        "layers": [("conv", 32, 5, 2, "relu"), ("maxpool", 2), ("fc", 1024, "relu"), ("fc", 10, "none")],
        "loss": "softmax",
        "train": {"batch": 64, "lr": 0.02, "lr_decay": 0.8, "momentum": 0.9,
                  "weight_decay": 5e-4, "epochs": 5},
    },
    "vgg": {
        "layers": [("conv", 32, 3, 1, "relu"), ("conv", 32, 3, 1, "relu"), ("maxpool", 2),
                   ("conv", 64, 3, 1, "relu"), ("conv", 64, 3, 1, "relu"), ("maxpool", 2),
                   ("fc", 256, "relu"), ("fc", 10, "none")],
        "loss": "softmax",
        "train": {"batch": 256, "lr": 0.02, "lr_decay": 0.8, "momentum": 0.9,
                  "weight_decay": 5e-4, "epochs": 3},
    },
}
ACTIVATIONS = {"none": lambda x: x, "sigmoid": torch.sigmoid, "relu": torch.relu, "tanh": torch.tanh}


def fail(msg, code=1):
    sys.stderr.write("pytorch_models: error: %s\n" % msg)
    sys.exit(code)


# ---------------------------------------------------------------- data

def load_split(directory, prefix, limit, device):
    try:
        x, labels = mnist_idx.load_scaled(directory, prefix, limit)
    except mnist_idx.IdxError as e:
        fail(str(e))
    x = torch.from_numpy(np.ascontiguousarray(x)).unsqueeze(1).to(device)   # N x 1 x 28 x 28
    y = torch.from_numpy(labels.astype(np.int64)).to(device)                # N
    return x, y


# ---------------------------------------------------------------- network

class Net(torch.nn.Module):
    """A feed-forward stack of conv / maxpool / fc layers on a 1x28x28 input."""

    def __init__(self, layers, loss, device, fc="linear"):
        super().__init__()
        self.fc = fc                                   # "linear" or "conv": same maths
        self.loss_kind = loss
        self.plan = []                                 # (kind, config, input shape (c, h, w))
        self.weights = torch.nn.ParameterList()
        self.biases = torch.nn.ParameterList()
        self.fan_in, self.gain = [], []
        shape = (1, 28, 28)
        for layer in layers:
            kind = layer[0]
            c, h, w = shape
            if kind == "conv":
                _, maps, k, pad, act = layer
                self.weights.append(torch.nn.Parameter(torch.zeros(maps, c, k, k, device=device)))
                self.biases.append(torch.nn.Parameter(torch.zeros(maps, device=device)))
                self.fan_in.append(c * k * k)
                out = (maps, h + 2 * pad - k + 1, w + 2 * pad - k + 1)
            elif kind == "maxpool":
                _, win = layer
                out = (c, h // win, w // win)
            elif kind == "fc":
                _, units, act = layer
                self.weights.append(torch.nn.Parameter(torch.zeros(units, c * h * w, device=device)))
                self.biases.append(torch.nn.Parameter(torch.zeros(units, device=device)))
                self.fan_in.append(c * h * w)
                out = (units, 1, 1)
            else:
                raise ValueError("unknown layer kind " + kind)
            if kind != "maxpool":
                self.gain.append(6.0 if act == "relu" else 3.0)
            self.plan.append((kind, layer, shape))
            shape = out
        self.outputs = shape[0]
        # One-hot targets by gathering rows of the identity: no host sync, fine in a CUDA graph.
        self.register_buffer("eye", torch.eye(self.outputs, device=device))

    @torch.no_grad()
    def reset(self, seed):
        """Seeded init in place (tensors keep their addresses, so CUDA graphs stay valid)."""
        g = torch.Generator().manual_seed(seed)
        for w, b, fan_in, gain in zip(self.weights, self.biases, self.fan_in, self.gain):
            a = (gain / fan_in) ** 0.5
            w.copy_(torch.empty(w.shape).uniform_(-a, a, generator=g))
            b.zero_()

    def forward(self, x):                              # N x 1 x 28 x 28
        n = x.shape[0]
        p = 0
        for kind, layer, (c, h, w) in self.plan:
            if kind == "maxpool":
                x = F.max_pool2d(x, layer[1])
                continue
            weight, bias = self.weights[p], self.biases[p]
            p += 1
            if kind == "conv":
                x = F.conv2d(x, weight, bias, padding=layer[3])
            elif self.fc == "conv":
                # The FC layer as a convolution whose kernel covers the whole input map:
                # oneDNN on the CPU, which beats Debian's generic (netlib) BLAS behind
                # F.linear. Output N x units x 1 x 1.
                x = F.conv2d(x.reshape(n, c, h, w), weight.view(-1, c, h, w), bias)
            else:
                x = F.linear(x.reshape(n, c * h * w), weight, bias)
            x = ACTIVATIONS[layer[-1]](x)
        return x.reshape(n, self.outputs)

    def loss(self, out, y):
        if self.loss_kind == "softmax":
            return F.cross_entropy(out, y)             # mean over the batch
        # 0.5 * sum over outputs and samples of (out - onehot)^2, divided by the batch.
        d = out - torch.index_select(self.eye, 0, y)
        return (d * d).sum() * (0.5 / out.shape[0])


# ---------------------------------------------------------------- training

def train_step(model, opt, x, y):
    loss = model.loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def reset_state(model, opt, seed):
    model.reset(seed)
    # Zeroed momentum == fresh optimizer: v = 0*m + g = g on the first step.
    for st in opt.state.values():
        buf = st.get("momentum_buffer")
        if buf is not None:
            buf.zero_()


class GraphStep:
    """One whole training step (forward, loss, backward, SGD update) captured as a
    CUDA graph that reads static_x/static_y. The learning rate is baked into the
    captured update, so a new rate means a new capture (once per epoch at most,
    outside the timed region)."""

    def __init__(self, model, opt, x_train, y_train, batch):
        self.model, self.opt = model, opt
        self.static_x = x_train[:batch].clone()
        self.static_y = y_train[:batch].clone()
        self.graph = self.loss = self.lr = None
        # Warm-up on a side stream (library init, cuDNN autotuning, momentum buffers)
        # before the first capture, as the CUDA-graphs recipe requires.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                train_step(model, opt, self.static_x, self.static_y)
        torch.cuda.current_stream().wait_stream(side)

    def set_lr(self, lr):
        if self.graph is not None and lr == self.lr:
            return
        for group in self.opt.param_groups:
            group["lr"] = lr
        torch.cuda.synchronize()
        self.opt.zero_grad(set_to_none=True)          # gradients are allocated inside the graph
        self.graph = self.loss = None                 # then the old graph and its pool can go
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.loss = self.model.loss(self.model(self.static_x), self.static_y)
            self.loss.backward()
            self.opt.step()
        torch.cuda.synchronize()
        self.graph, self.lr = graph, lr

    def step(self, x_train, y_train, idx):
        torch.index_select(x_train, 0, idx, out=self.static_x)
        torch.index_select(y_train, 0, idx, out=self.static_y)
        self.graph.replay()
        return self.loss


@torch.no_grad()
def evaluate(model, x, y, chunk=2000):
    correct = 0
    for s in range(0, x.shape[0], chunk):
        correct += int((model(x[s:s + chunk]).argmax(1) == y[s:s + chunk]).sum())
    return correct / max(1, x.shape[0])


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def pick_fc(model, opt, x, y, batch):
    """Time F.linear against the convolution form on a few untimed steps (CPU only);
    the weights are reset afterwards by the caller."""
    best = None
    bs = min(batch, x.shape[0])
    steps = 50 if bs == 1 else 5
    for cand in ("linear", "conv"):
        model.fc = cand
        train_step(model, opt, x[:bs], y[:bs])
        t0 = time.perf_counter()
        for _ in range(steps):
            train_step(model, opt, x[:bs], y[:bs])
        dt = time.perf_counter() - t0
        if best is None or dt < best[0]:
            best = (dt, cand)
    return best[1]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_data = os.environ.get("LENET5_DATA") or os.path.join(here, "..", "..", "data", "mnist")
    ap = argparse.ArgumentParser(description="PyTorch peer of lenet5-cl's mlp and cnn models "
                                             "(speed comparison); recipe flags default to the model's")
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--lr-decay", type=float, default=None, help="multiply the rate by this after every epoch")
    ap.add_argument("--momentum", type=float, default=None)
    ap.add_argument("--weight-decay", type=float, default=None)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--cuda-graphs", action="store_true",
                    help="capture one whole training step as a CUDA graph and replay it (cuda only)")
    ap.add_argument("--tf32", action="store_true",
                    help="let cuDNN/cuBLAS use TF32 (default: strict fp32, as lenet5-cl computes)")
    ap.add_argument("--data", default=default_data)
    ap.add_argument("--train-limit", type=int, default=None)
    ap.add_argument("--test-limit", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fc", choices=("auto", "linear", "conv"), default="auto",
                    help="FC layers as F.linear or as F.conv2d (same maths); auto: linear on CUDA, "
                         "on the CPU whichever is faster over a few untimed steps")
    args = ap.parse_args()
    spec = MODELS[args.model]
    for key, value in spec["train"].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.batch < 1 or args.epochs < 1 or args.threads < 1 or args.repeats < 1:
        ap.error("--batch, --epochs, --threads and --repeats must be >= 1")
    if not 0.0 < args.lr_decay <= 1.0:
        ap.error("--lr-decay must be in (0, 1]")
    if args.cuda_graphs and args.device != "cuda":
        ap.error("--cuda-graphs needs --device cuda")
    if args.device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: torch %s sees no CUDA device" % torch.__version__)

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dev_name = "cpu"
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = args.tf32
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        dev_name = torch.cuda.get_device_name(device)

    x_train, y_train = load_split(args.data, "train", args.train_limit, device)
    x_test, y_test = load_split(args.data, "t10k", args.test_limit, device)
    n, B = x_train.shape[0], args.batch
    if args.cuda_graphs and n < B:
        fail("--cuda-graphs: %d training samples, fewer than one batch of %d" % (n, B))

    model = Net(spec["layers"], spec["loss"], device, "linear" if args.fc == "auto" else args.fc)
    model.reset(args.seed)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          dampening=0.0, weight_decay=args.weight_decay, nesterov=False)
    if args.fc == "auto" and device.type == "cpu":
        model.fc = pick_fc(model, opt, x_train, y_train, B)

    # Untimed warm-up (library init, cuDNN autotuning, momentum buffers, graph capture);
    # every repeat then starts again from the seeded init.
    graph = None
    if args.cuda_graphs:
        graph = GraphStep(model, opt, x_train, y_train, B)
    else:
        sizes = [min(B, n)] * 2 + ([n % B] if n % B else [])
        for bs in sizes:
            train_step(model, opt, x_train[:bs], y_train[:bs])
    sync(device)

    common = {"peer": "pytorch", "model": args.model, "torch": torch.__version__,
              "device": args.device, "device_name": dev_name, "threads": args.threads,
              "batch": B, "lr": args.lr, "lr_decay": args.lr_decay, "momentum": args.momentum,
              "weight_decay": args.weight_decay, "loss": spec["loss"], "train_samples": n,
              "test_samples": int(x_test.shape[0]), "cuda_graphs": bool(args.cuda_graphs),
              "tf32": bool(args.tf32 and device.type == "cuda"), "fc": model.fc}
    seconds, totals, last_acc = [], [], None
    for rep in range(args.repeats):
        reset_state(model, opt, args.seed)
        torch.manual_seed(args.seed)                             # same shuffles every repeat
        total = 0.0
        for epoch in range(1, args.epochs + 1):
            lr = args.lr * args.lr_decay ** (epoch - 1)          # as host/train/trainer.cpp
            if graph is not None:
                graph.set_lr(lr)                                 # recaptures when the rate changed
            else:
                for group in opt.param_groups:
                    group["lr"] = lr
            sync(device)
            t0 = time.perf_counter()
            perm = torch.randperm(n, device=device)
            loss_sum = torch.zeros((), device=device)
            if graph is not None:
                steps = n // B                                   # last incomplete batch dropped
                for k in range(steps):
                    loss = graph.step(x_train, y_train, perm[k * B:(k + 1) * B])
                    loss_sum.add_(loss.detach())
                seen = steps * B
                loss_sum.mul_(B)
            else:
                for s in range(0, n, B):
                    idx = perm[s:s + B]
                    loss = train_step(model, opt, x_train.index_select(0, idx),
                                      y_train.index_select(0, idx))
                    loss_sum.add_(loss.detach(), alpha=float(idx.shape[0]))
                seen = n
            sync(device)
            dt = time.perf_counter() - t0
            total += dt
            seconds.append(dt)
            train_loss = float(loss_sum) / max(1, seen)
            last_acc = evaluate(model, x_test, y_test)
            rec = dict(common, repeat=rep + 1, epoch=epoch, epoch_lr=lr, seconds=round(dt, 6),
                       train_loss=round(train_loss, 6), test_accuracy=round(last_acc, 6))
            print(json.dumps(rec), flush=True)
        totals.append(total)
    summary = dict(common, summary=True, epochs=args.epochs, repeats=args.repeats,
                   median_seconds=round(statistics.median(seconds), 6),
                   min_seconds=round(min(seconds), 6),
                   median_total_seconds=round(statistics.median(totals), 6),
                   final_test_accuracy=round(last_acc, 6))
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
