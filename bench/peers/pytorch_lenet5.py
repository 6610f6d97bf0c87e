#!/usr/bin/env python3
"""PyTorch peer of lenet5-cl: the same LeNet-5, trained the same way, timed per epoch.

Network (DESIGN.md): 1x32x32 input (MNIST padded by 2, p/127.5-1, background -1)
  C1 conv5x5 6 tanh -> S2 2x2 sum-pool * coef + bias, tanh -> C3 conv5x5 16 over
  LeCun's Table I (60 of 96 kernels, a 0/1 mask on a full 16x6 kernel), tanh ->
  S4 as S2 -> C5 conv5x5 120 (= FC 400->120) tanh -> F6 FC 84 tanh -> FC 10,
  softmax cross-entropy (mean over the batch).
Optimizer: SGD with momentum (v = m*v + g; p -= lr*v), as the C++ trainer.
Initialisation follows host/model/network.cpp's rule (uniform +-sqrt(3/fan_in),
subsampling coefficients 1/4, biases 0) but not its random stream.

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
    sys.stderr.write("pytorch_lenet5: torch not installed "
                     "(apt-get install python3-torch, use /usr/bin/python3)\n")
    sys.exit(3)
try:
    import numpy as np
except ImportError:
    sys.stderr.write("pytorch_lenet5: numpy not installed (apt-get install python3-numpy)\n")
    sys.exit(3)
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
import mnist_idx   # bench/peers/mnist_idx.py: the IDX reader shared with pytorch_models.py

# LeCun et al. 1998, Table I: rows = S2 map i (0..5), columns = C3 map o (0..15).
TABLE_I = (
    "X   XXX  XXXX XX",
    "XX   XXX  XXXX X",
    "XXX   XXX  X XXX",
    " XXX  XXXX  X XX",
    "  XXX  XXXX XX X",
    "   XXX  XXXX XXX",
)


def fail(msg, code=1):
    sys.stderr.write("pytorch_lenet5: error: %s\n" % msg)
    sys.exit(code)


# ---------------------------------------------------------------- data

def load_split(directory, prefix, limit, device):
    try:
        x, labels = mnist_idx.load_scaled(directory, prefix, limit)
    except mnist_idx.IdxError as e:
        fail(str(e))
    x = np.pad(x, ((0, 0), (2, 2), (2, 2)), mode="constant", constant_values=-1.0)
    x = torch.from_numpy(np.ascontiguousarray(x)).unsqueeze(1).to(device)   # N x 1 x 32 x 32
    y = torch.from_numpy(labels.astype(np.int64)).to(device)                # N
    return x, y


# ---------------------------------------------------------------- network

class LeNet5(torch.nn.Module):
    def __init__(self, device, fc="linear"):
        super().__init__()
        self.fc = fc                                       # "linear" or "conv": same maths
        P = lambda *shape: torch.nn.Parameter(torch.zeros(*shape, device=device))
        self.c1_w, self.c1_b = P(6, 1, 5, 5), P(6)
        self.s2_c, self.s2_b = P(6), P(6)
        self.c3_w, self.c3_b = P(16, 6, 5, 5), P(16)
        self.s4_c, self.s4_b = P(16), P(16)
        self.c5_w, self.c5_b = P(120, 16, 5, 5), P(120)   # conv 5x5 over 16x5x5 = FC 400->120
        self.f6_w, self.f6_b = P(84, 120), P(84)
        self.out_w, self.out_b = P(10, 84), P(10)
        mask = torch.tensor([[1.0 if TABLE_I[i][o] == "X" else 0.0 for i in range(6)]
                             for o in range(16)])        # [o][i]
        self.register_buffer("c3_mask", mask.view(16, 6, 1, 1).to(device))

    @torch.no_grad()
    def reset(self, seed):
        """Seeded init in place (tensors keep their addresses, so CUDA graphs stay valid)."""
        g = torch.Generator().manual_seed(seed)

        def uni(shape, fan_in):
            a = (3.0 / fan_in) ** 0.5
            return torch.empty(*shape).uniform_(-a, a, generator=g)

        self.c1_w.copy_(uni((6, 1, 5, 5), 25))
        fan_c3 = self.c3_mask.view(16, 6).sum(1).cpu() * 25          # per C3 map
        w3 = torch.cat([uni((1, 6, 5, 5), float(fan_c3[o])) for o in range(16)])
        self.c3_w.copy_(w3 * self.c3_mask.cpu())
        self.c5_w.copy_(uni((120, 16, 5, 5), 400))
        self.f6_w.copy_(uni((84, 120), 120))
        self.out_w.copy_(uni((10, 84), 84))
        self.s2_c.fill_(0.25)
        self.s4_c.fill_(0.25)
        for b in (self.c1_b, self.s2_b, self.c3_b, self.s4_b, self.c5_b, self.f6_b, self.out_b):
            b.zero_()

    @staticmethod
    def subsample(x, coef, bias):
        # 2x2 sum (avg_pool with divisor 1), times a per-map coefficient, plus a per-map bias.
        s = F.avg_pool2d(x, 2, divisor_override=1)
        return torch.tanh(torch.addcmul(bias.view(1, -1, 1, 1), s, coef.view(1, -1, 1, 1)))

    def forward(self, x):                                          # N x 1 x 32 x 32
        x = torch.tanh(F.conv2d(x, self.c1_w, self.c1_b))          # N x 6 x 28 x 28
        x = self.subsample(x, self.s2_c, self.s2_b)                # N x 6 x 14 x 14
        x = torch.tanh(F.conv2d(x, self.c3_w * self.c3_mask, self.c3_b))  # N x 16 x 10 x 10
        x = self.subsample(x, self.s4_c, self.s4_b)                # N x 16 x 5 x 5
        n = x.shape[0]
        if self.fc == "conv":
            # C5, F6 and output as convolutions (5x5, 1x1, 1x1) on 1x1 maps: oneDNN on
            # the CPU, which beats a generic (netlib) BLAS behind F.linear by 3-5x.
            x = torch.tanh(F.conv2d(x, self.c5_w, self.c5_b))                          # N x 120 x 1 x 1
            x = torch.tanh(F.conv2d(x, self.f6_w.view(84, 120, 1, 1), self.f6_b))     # N x 84 x 1 x 1
            return F.conv2d(x, self.out_w.view(10, 84, 1, 1), self.out_b).view(n, 10)  # N x 10 (logits)
        x = torch.tanh(F.linear(x.reshape(n, 400), self.c5_w.view(120, 400), self.c5_b))  # N x 120
        x = torch.tanh(F.linear(x, self.f6_w, self.f6_b))                          # N x 84
        return F.linear(x, self.out_w, self.out_b)                                 # N x 10 (logits)


# ---------------------------------------------------------------- training

def reset_state(model, opt, seed):
    model.reset(seed)
    # Zeroed momentum == fresh optimizer: v = 0*m + g = g on the first step.
    for st in opt.state.values():
        buf = st.get("momentum_buffer")
        if buf is not None:
            buf.zero_()


def train_step(model, opt, x, y):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


@torch.no_grad()
def evaluate(model, x, y, chunk=2000):
    correct = 0
    for s in range(0, x.shape[0], chunk):
        correct += int((model(x[s:s + chunk]).argmax(1) == y[s:s + chunk]).sum())
    return correct / max(1, x.shape[0])


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_data = os.environ.get("LENET5_DATA") or os.path.join(here, "..", "..", "data", "mnist")
    ap = argparse.ArgumentParser(description="PyTorch LeNet-5 peer for lenet5-cl (speed comparison)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--cuda-graphs", action="store_true",
                    help="capture one training step as a CUDA graph and replay it (cuda only)")
    ap.add_argument("--data", default=default_data)
    ap.add_argument("--train-limit", type=int, default=None)
    ap.add_argument("--test-limit", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fc", choices=("auto", "linear", "conv"), default="auto",
                    help="C5/F6/output as F.linear or as F.conv2d (same maths); auto: "
                         "linear on CUDA, on the CPU whichever is faster over a few untimed steps")
    args = ap.parse_args()
    if args.batch < 1 or args.epochs < 1 or args.threads < 1 or args.repeats < 1:
        ap.error("--batch, --epochs, --threads and --repeats must be >= 1")
    if args.cuda_graphs and args.device != "cuda":
        ap.error("--cuda-graphs needs --device cuda")
    if args.device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: torch %s sees no CUDA device" % torch.__version__)

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dev_name = "cpu"
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        dev_name = torch.cuda.get_device_name(device)

    x_train, y_train = load_split(args.data, "train", args.train_limit, device)
    x_test, y_test = load_split(args.data, "t10k", args.test_limit, device)
    n, B = x_train.shape[0], args.batch
    if args.cuda_graphs and n < B:
        fail("--cuda-graphs: %d training samples, fewer than one batch of %d" % (n, B))

    fc = "linear" if args.fc == "auto" else args.fc
    model = LeNet5(device, fc)
    model.reset(args.seed)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    if args.fc == "auto" and device.type == "cpu":
        # F.linear goes through the BLAS torch was built with: MKL in pip wheels, but a
        # generic (netlib) one in Debian's python3-torch, where oneDNN convolutions are 3-5x
        # faster. Time both on a few batches (untimed; the weights are reset below).
        best = None
        for cand in ("linear", "conv"):
            model.fc = cand
            bs = min(B, n)
            train_step(model, opt, x_train[:bs], y_train[:bs])
            t0 = time.perf_counter()
            for _ in range(10):
                train_step(model, opt, x_train[:bs], y_train[:bs])
            dt = time.perf_counter() - t0
            if best is None or dt < best[0]:
                best = (dt, cand)
        fc = model.fc = best[1]

    # Untimed warm-up (library init, cuDNN autotuning, momentum buffers, graph capture);
    # every repeat then starts again from the seeded init.
    graph = None
    static_x = static_y = static_loss = None
    if args.cuda_graphs:
        static_x = x_train[:B].clone()
        static_y = y_train[:B].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                train_step(model, opt, static_x, static_y)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = F.cross_entropy(model(static_x), static_y)
            static_loss.backward()
            opt.step()
    else:
        sizes = [min(B, n)] * 2 + ([n % B] if n % B else [])
        for bs in sizes:
            train_step(model, opt, x_train[:bs], y_train[:bs])
    sync(device)

    common = {"peer": "pytorch", "torch": torch.__version__, "device": args.device,
              "device_name": dev_name, "threads": args.threads, "batch": B,
              "lr": args.lr, "momentum": args.momentum, "train_samples": n,
              "test_samples": int(x_test.shape[0]), "cuda_graphs": bool(args.cuda_graphs),
              "fc": fc}
    seconds, totals, last_acc = [], [], None
    for rep in range(args.repeats):
        reset_state(model, opt, args.seed)
        torch.manual_seed(args.seed)                             # same shuffles every repeat
        total = 0.0
        for epoch in range(1, args.epochs + 1):
            sync(device)
            t0 = time.perf_counter()
            perm = torch.randperm(n, device=device)
            loss_sum = torch.zeros((), device=device)
            if graph is not None:
                steps = n // B                                   # last incomplete batch dropped
                for k in range(steps):
                    idx = perm[k * B:(k + 1) * B]
                    torch.index_select(x_train, 0, idx, out=static_x)
                    torch.index_select(y_train, 0, idx, out=static_y)
                    graph.replay()
                    loss_sum.add_(static_loss.detach())
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
            rec = dict(common, repeat=rep + 1, epoch=epoch, seconds=round(dt, 6),
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
