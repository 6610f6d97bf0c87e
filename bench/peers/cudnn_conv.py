#!/usr/bin/env python3
"""PyTorch/cuDNN peer of `lenet5 convbench` (issue 12): the same cases, timed the same way.

Cases (as convbench's defaults): seed 002's grid, one N x N image of 3 maps, one 3x3 filter,
padding 1, stride 1-3, N = 256 .. 4096 grown until the filter slides exactly to the edge; and
VGG16's 3x3 layers (3 to 512 maps, 224 down to 14) at batch 1 and 16. Each case runs
F.conv2d(x, w, b) then ReLU in strict fp32 (cudnn.allow_tf32 = matmul.allow_tf32 = False,
cudnn.benchmark = True so that cuDNN picks its fastest algorithm, as convbench's best of three).

Per case: kernel ms (CUDA events around the convolution and ReLU on resident tensors) and ms with
the host copies (input and weights from pinned host memory to the GPU, the convolution, the output
back; the seed's measure), GFLOP/s counted as direct convolution (2 * outputs * in_maps * 9), and
the backward passes' kernel ms (input and weight gradients); medians of --repeats.

  python3 bench/peers/cudnn_conv.py --json cudnn.json
  python3 bench/peers/cudnn_conv.py --compare ours.json --json cudnn.json   # + ratios beside convbench's JSON

--compare FILE prints, per case, cuDNN's kernel ms beside the best of convbench's algorithms (and
each one's), as ours / cuDNN (below 1: we are faster), and convbench's largest error.
Exit status: 0 ok, 1 failure, 2 usage error, 3 torch or CUDA missing (benchmark: skip).
"""

import argparse
import json
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.stderr.write("cudnn_conv: torch not installed\n")
    sys.exit(3)

VGG16 = [(3, 64, 224), (64, 64, 224), (64, 128, 112), (128, 128, 112), (128, 256, 56), (256, 256, 56),
         (256, 512, 28), (512, 512, 28), (512, 512, 14)]


def cases(args):
    out = []
    if "seed" in args.cases:
        for n in args.sizes:
            for s in args.strides:
                size = n
                while (size - 1) % s:
                    size += 1
                out.append(dict(case="seed", batch=1, in_c=args.channels, in_h=size, in_w=size, out_c=args.filters,
                                kernel=3, stride=s, pad=1))
    if "vgg16" in args.cases:
        for b in args.batch:
            for ic, oc, hw in VGG16:
                out.append(dict(case="vgg16", batch=b, in_c=ic, in_h=hw, in_w=hw, out_c=oc, kernel=3, stride=1, pad=1))
    return out


def key(c):
    return (c["case"], c["batch"], c["in_c"], c["in_h"], c["in_w"], c["out_c"], c["kernel"], c["stride"], c["pad"])


def gpu_ms(fn, repeats):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure(c, repeats, backward):
    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(1)
    shape = (c["batch"], c["in_c"], c["in_h"], c["in_w"])
    xh = (torch.rand(shape, generator=g) * 2 - 1).pin_memory()
    wh = (torch.rand((c["out_c"], c["in_c"], 3, 3), generator=g) * 2 - 1).pin_memory()
    bh = torch.rand(c["out_c"], generator=g) * 2 - 1
    x, w, b = xh.to(dev), wh.to(dev), bh.to(dev)
    run = lambda: F.relu(F.conv2d(x, w, b, stride=c["stride"], padding=c["pad"]))
    y = run()
    yh = torch.empty(y.shape, pin_memory=True)
    row = dict(c, forward_ms=gpu_ms(run, repeats))

    def with_copies():
        x.copy_(xh, non_blocking=True)
        w.copy_(wh, non_blocking=True)
        yh.copy_(run(), non_blocking=True)
        torch.cuda.synchronize()
    with_copies()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        with_copies()
        times.append((time.perf_counter() - t0) * 1e3)
    row["forward_copy_ms"] = statistics.median(times)
    flops = 2.0 * y.numel() * c["in_c"] * 9
    row["gflops"] = flops / row["forward_ms"] * 1e-6
    if backward:
        dy = torch.rand(y.shape, device=dev) * 2 - 1
        grad_in = lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, stride=c["stride"], padding=c["pad"])
        grad_w = lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, stride=c["stride"], padding=c["pad"])
        row["backward_ms"] = gpu_ms(lambda: (grad_in(), grad_w(), dy.sum((0, 2, 3))), repeats)
    return row


def compare(rows, ours_path):
    ours = json.load(open(ours_path))
    by_case = {}
    for r in ours["rows"]:
        by_case.setdefault(key(r), []).append(r)
    ok = True
    print(f"\nours ({ours['device']}) beside cuDNN: kernel ms, ours / cuDNN (below 1: faster); copies ms likewise")
    print(f"{'case':<7}{'shape':<28}{'cuDNN':>9}{'best':>9}{'algo':>9}{'ratio':>8}"
          f"{'direct':>8}{'im2col':>8}{'clblast':>8}{'copies':>8}{'max_err':>10}")
    for r in rows:
        shape = f"{r['batch']}x{r['in_c']}x{r['in_h']}x{r['in_w']} s{r['stride']} -> {r['out_c']}"
        mine = [o for o in by_case.get(key(r), []) if o["ok"]]
        if not mine:
            print(f"{r['case']:<7}{shape:<28}{r['forward_ms']:>9.3f}  (no passing convbench row)")
            ok = False
            continue
        best = min(mine, key=lambda o: o["forward_ms"])
        ratio = {o["algo"]: o["forward_ms"] / r["forward_ms"] for o in mine}
        err = max(o["max_rel_error"] for o in by_case[key(r)])
        print(f"{r['case']:<7}{shape:<28}{r['forward_ms']:>9.3f}{best['forward_ms']:>9.3f}{best['algo']:>9}"
              f"{best['forward_ms'] / r['forward_ms']:>8.2f}"
              + "".join(f"{ratio[a]:>8.2f}" if a in ratio else f"{'-':>8}" for a in ("direct", "im2col", "clblast"))
              + f"{best['forward_copy_ms'] / r['forward_copy_ms']:>8.2f}{err:>10.1e}")
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ints = lambda t: [int(v) for v in t.split(",")]
    p.add_argument("--sizes", type=ints, default=[256, 512, 1024, 2048, 4096])
    p.add_argument("--strides", type=ints, default=[1, 2, 3])
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--filters", type=int, default=1)
    p.add_argument("--batch", type=ints, default=[1, 16])
    p.add_argument("--cases", default="seed,vgg16")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--forward-only", action="store_true")
    p.add_argument("--json")
    p.add_argument("--compare", metavar="CONVBENCH_JSON")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.stderr.write("cudnn_conv: no CUDA device\n")
        return 3
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    print(f"cuDNN {torch.backends.cudnn.version()} on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"strict fp32, {args.repeats} repeats (medians)")
    print(f"{'case':<7}{'shape':<28}{'fwd_ms':>10}{'copies_ms':>11}{'GFLOP/s':>10}{'bwd_ms':>10}")
    rows = []
    for c in cases(args):
        r = measure(c, args.repeats, not args.forward_only)
        rows.append(r)
        shape = f"{c['batch']}x{c['in_c']}x{c['in_h']}x{c['in_w']} s{c['stride']} -> {c['out_c']}"
        print(f"{c['case']:<7}{shape:<28}{r['forward_ms']:>10.3f}{r['forward_copy_ms']:>11.3f}{r['gflops']:>10.1f}"
              f"{r.get('backward_ms', 0.0):>10.3f}", flush=True)
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), cudnn=torch.backends.cudnn.version(),
                           torch=torch.__version__, rows=rows), f, indent=1)
    if args.compare:
        return 0 if compare(rows, args.compare) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
