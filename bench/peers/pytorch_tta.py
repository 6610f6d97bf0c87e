#!/usr/bin/env python3
"""Time to accuracy of the PyTorch LeNet-5 peer, with lenet5-cl's recipe (issue 48).

Trains pytorch_lenet5.py's LeNet-5 (its model, initialisation rule and data loading, imported
from there) until the first test evaluation at or above --target, as `lenet5 train
--target-accuracy A --eval-every N` does, and reports the training seconds to it:

  /usr/bin/python3 bench/peers/pytorch_tta.py --recipe models/lenet5-fast.net --seed 1 \\
      --target 99% --eval-every 23 --threads 2
  python3 bench/peers/pytorch_tta.py --recipe models/lenet5-fast.net --device cuda --cuda-graphs ...

The recipe: --recipe FILE reads a model file's `train` line (batch, epochs, lr, lr-decay,
momentum, weight-decay, schedule, warmup, nesterov, label-smoothing) and its `input` line's
scale and shift; a flag of the same name overrides it. The rate of each step is
host/model/lr_schedule.cpp's (step, onecycle, cosine; warm-up in epochs rounded to steps), the
update is ours and torch.optim.SGD's (d = g + wd*p; v = m*v + d; Nesterov: d += m*v, else d = v;
p -= lr*d), the loss softmax cross-entropy with label smoothing, mean over the batch. Every epoch
is a fresh torch.randperm on the device; the last batch of an epoch is the remainder, as ours, so
an epoch has ceil(n / batch) steps.

Timing: the training steps only. Evaluations (every --eval-every steps counted from the first
step, and at every epoch's end) are outside the clock, after a device synchronisation. Before the
clock starts, an untimed warm-up (library start-up, cuDNN autotuning, the CUDA graphs' capture)
runs a few steps, and the weights and momentum are then reset to the seeded init. With
--cuda-graphs a whole step (forward, loss, backward, update) is captured once per batch size
(the full batch and the epoch's remainder) and replayed after two index_selects into its static
inputs; the rate is a device tensor the captured update reads, written before each replay.

Output: a JSON line per evaluation, then one with "summary": true (reached, step, epoch,
train_seconds, wall_seconds, best_accuracy, epoch_seconds). Exit 0 whether or not the target is
reached; 1 failure, 2 usage, 3 torch missing (as pytorch_lenet5.py).
"""

import argparse
import json
import math
import os
import sys
import time

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
import pytorch_lenet5 as peer    # exits 3 when torch is missing
from pytorch_lenet5 import F, torch

RECIPE_KEYS = {"batch": int, "epochs": int, "lr": float, "lr-decay": float, "momentum": float,
               "weight-decay": float, "schedule": str, "warmup": float, "label-smoothing": float}


def read_recipe(path):
    """A model file's train-line settings and input scaling, as a dict of flag names."""
    out = {}
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        peer.fail("--recipe %s: %s" % (path, e.strerror), 2)
    for line in lines:
        words = line.split("#", 1)[0].split()
        if not words or words[0] not in ("train", "input"):
            continue
        for w in words[1:]:
            key, eq, value = w.partition("=")
            if words[0] == "input":
                if key in ("scale", "shift"):
                    out["input-" + key] = float(value)
            elif key == "nesterov" and not eq:
                out["nesterov"] = True
            elif key in RECIPE_KEYS:
                out[key] = RECIPE_KEYS[key](value)
            else:
                peer.fail("--recipe %s: unknown train key '%s'" % (path, w), 2)
    return out


def scheduled_lr(step, steps_per_epoch, epochs, kind, lr, lr_decay, warmup):
    """host/model/lr_schedule.cpp's scheduled_lr: the rate of 0-based global step `step`."""
    total = steps_per_epoch * epochs
    warm = int(math.floor(warmup * steps_per_epoch + 0.5))      # llround of a non-negative value
    ramp = (step + 1) / warm if step < warm else 1.0
    if kind == "step":
        return lr * lr_decay ** (step // steps_per_epoch) * ramp
    if step < warm:
        return lr * ramp
    progress = min(1.0, max(0.0, (step - warm) / max(1, total - warm)))
    shape = 1.0 - progress if kind == "onecycle" else 0.5 * (1.0 + math.cos(math.pi * progress))
    return lr * shape


class Sgd:
    """SGD with momentum, weight decay and optional Nesterov, as ours and torch.optim.SGD
    (dampening 0). `lr` is a float, or a 0-d device tensor that a captured graph reads."""

    def __init__(self, params, momentum, weight_decay, nesterov):
        self.params = list(params)
        self.bufs = [torch.zeros_like(p) for p in self.params]
        self.m, self.wd, self.nesterov = momentum, weight_decay, nesterov
        self.tensor_mul = hasattr(torch, "_foreach_mul") and self._tensor_mul_works()

    def _tensor_mul_works(self):
        try:
            torch._foreach_mul([torch.ones(1)], torch.ones(()))
            return True
        except (RuntimeError, TypeError):
            return False

    def reset(self):
        for b in self.bufs:
            b.zero_()

    @torch.no_grad()
    def step(self, lr):
        grads = [p.grad for p in self.params]
        if self.wd:
            torch._foreach_add_(grads, self.params, alpha=self.wd)      # d = g + wd*p
        torch._foreach_mul_(self.bufs, self.m)
        torch._foreach_add_(self.bufs, grads)                           # v = m*v + d
        if self.nesterov:
            torch._foreach_add_(grads, self.bufs, alpha=self.m)         # d = d + m*v
            direction = grads
        else:
            direction = self.bufs
        if not isinstance(lr, torch.Tensor):
            torch._foreach_add_(self.params, direction, alpha=-lr)      # p -= lr*d
        elif self.tensor_mul:
            torch._foreach_sub_(self.params, torch._foreach_mul(direction, lr))
        else:
            for p, d in zip(self.params, direction):
                p.sub_(d * lr)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_data = os.environ.get("LENET5_DATA") or os.path.join(here, "..", "..", "data", "mnist")
    ap = argparse.ArgumentParser(description="PyTorch LeNet-5: time to a target test accuracy")
    ap.add_argument("--recipe", help="a model file whose train line (and input scaling) to use")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--lr-decay", type=float)
    ap.add_argument("--momentum", type=float)
    ap.add_argument("--weight-decay", type=float)
    ap.add_argument("--schedule", choices=("step", "onecycle", "cosine"))
    ap.add_argument("--warmup", type=float, help="epochs of linear warm-up")
    ap.add_argument("--nesterov", action="store_true", default=None)
    ap.add_argument("--label-smoothing", type=float)
    ap.add_argument("--target", default="99%", help="0.99 or 99%% (default)")
    ap.add_argument("--eval-every", type=int, default=0, help="also evaluate every N steps")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--cuda-graphs", action="store_true")
    ap.add_argument("--fc", choices=("linear", "conv"), default=None,
                    help="C5/F6/output as F.linear or F.conv2d (default: conv on the CPU, where "
                         "Debian's torch has a slow BLAS, linear on CUDA)")
    ap.add_argument("--data", default=default_data)
    ap.add_argument("--train-limit", type=int)
    ap.add_argument("--test-limit", type=int)
    args = ap.parse_args()

    # Flags first, then the recipe file, then lenet5-cl's defaults (host/train/trainer.h).
    r = {"batch": 64, "epochs": 10, "lr": 0.05, "lr-decay": 0.8, "momentum": 0.9, "weight-decay": 5e-4,
         "schedule": "step", "warmup": 0.0, "nesterov": False, "label-smoothing": 0.0,
         "input-scale": 2.0, "input-shift": -1.0}
    if args.recipe:
        r.update(read_recipe(args.recipe))
    for key in RECIPE_KEYS.keys() | {"nesterov"}:
        v = getattr(args, key.replace("-", "_"))
        if v is not None:
            r[key] = v
    t = args.target.strip()
    target = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    if not 0 < target <= 1:
        ap.error("--target must be in (0, 1] or (0%, 100%]")
    if r["batch"] < 1 or r["epochs"] < 1 or args.threads < 1 or args.eval_every < 0:
        ap.error("batch, epochs and --threads must be >= 1, --eval-every >= 0")
    if args.cuda_graphs and args.device != "cuda":
        ap.error("--cuda-graphs needs --device cuda")
    if args.device == "cuda" and not torch.cuda.is_available():
        peer.fail("--device cuda: torch %s sees no CUDA device" % torch.__version__)

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dev_name = "cpu"
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = False          # strict fp32, as ours
        torch.backends.cuda.matmul.allow_tf32 = False
        dev_name = torch.cuda.get_device_name(device)

    def load(prefix, limit):
        x, y = peer.load_split(args.data, prefix, limit, device)   # [-1, 1], padded with -1
        if (r["input-scale"], r["input-shift"]) != (2.0, -1.0):    # b/255 * scale + shift
            x = (x + 1.0) * (0.5 * r["input-scale"]) + r["input-shift"]
        return x, y

    x_train, y_train = load("train", args.train_limit)
    x_test, y_test = load("t10k", args.test_limit)
    n, B = x_train.shape[0], r["batch"]
    steps_per_epoch = (n + B - 1) // B
    model = peer.LeNet5(device, args.fc or ("linear" if device.type == "cuda" else "conv"))
    model.reset(args.seed)
    opt = Sgd(model.parameters(), r["momentum"], r["weight-decay"], r["nesterov"])
    smoothing = r["label-smoothing"]

    def loss_and_backward(x, y):
        loss = F.cross_entropy(model(x), y, label_smoothing=smoothing)
        for p in model.parameters():
            p.grad = None
        loss.backward()
        return loss

    # Untimed warm-up, then the seeded init again. With CUDA graphs: capture a step per batch size.
    sizes = sorted({B, n - (steps_per_epoch - 1) * B} if n >= B else {n})
    graphs = {}
    lr_t = torch.zeros((), device=device)
    if args.cuda_graphs:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for bs in sizes:
                for _ in range(3):
                    loss_and_backward(x_train[:bs], y_train[:bs])
                    opt.step(lr_t)
        torch.cuda.current_stream().wait_stream(side)
        for bs in sizes:
            sx, sy = x_train[:bs].clone(), y_train[:bs].clone()
            for p in model.parameters():
                p.grad = None
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                loss = F.cross_entropy(model(sx), sy, label_smoothing=smoothing)
                loss.backward()
                opt.step(lr_t)
            graphs[bs] = (g, sx, sy)
    else:
        for bs in sizes * 2:
            loss_and_backward(x_train[:bs], y_train[:bs])
            opt.step(0.0)
    peer.sync(device)
    model.reset(args.seed)
    opt.reset()
    torch.manual_seed(args.seed)

    common = {"peer": "pytorch", "torch": torch.__version__, "device": args.device, "device_name": dev_name,
              "threads": args.threads, "cuda_graphs": bool(args.cuda_graphs), "fc": model.fc, "seed": args.seed,
              "train_samples": n, "test_samples": int(x_test.shape[0]), "target": target,
              "eval_every": args.eval_every, "recipe": r}
    train_s, best, step, at = 0.0, 0.0, 0, None
    epoch_seconds = []
    wall0 = time.perf_counter()
    for epoch in range(1, r["epochs"] + 1):
        epoch_s = 0.0
        t0 = time.perf_counter()
        perm = torch.randperm(n, device=device)
        for k in range(steps_per_epoch):
            idx = perm[k * B:(k + 1) * B]
            lr = scheduled_lr(step, steps_per_epoch, r["epochs"], r["schedule"], r["lr"], r["lr-decay"], r["warmup"])
            if graphs:
                g, sx, sy = graphs[int(idx.shape[0])]
                torch.index_select(x_train, 0, idx, out=sx)
                torch.index_select(y_train, 0, idx, out=sy)
                lr_t.fill_(lr)
                g.replay()
            else:
                loss_and_backward(x_train.index_select(0, idx), y_train.index_select(0, idx))
                opt.step(lr)
            step += 1
            last = k + 1 == steps_per_epoch
            if last or (args.eval_every and step % args.eval_every == 0):
                peer.sync(device)
                dt = time.perf_counter() - t0
                train_s += dt
                epoch_s += dt
                acc = peer.evaluate(model, x_test, y_test)
                best = max(best, acc)
                ev = {"step": step, "epoch": round(step / steps_per_epoch, 6), "test_accuracy": acc,
                      "train_seconds": round(train_s, 6), "wall_seconds": round(time.perf_counter() - wall0, 6)}
                print(json.dumps(dict(ev, seed=args.seed)), flush=True)
                if acc >= target:
                    at = ev
                    break
                t0 = time.perf_counter()
        epoch_seconds.append(round(epoch_s, 6))
        if at:
            break
    summary = dict(common, summary=True, reached=at is not None, best_accuracy=best,
                   epoch_seconds=epoch_seconds, **(at or ev))
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
