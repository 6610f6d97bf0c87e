#!/usr/bin/env python3
"""Epoch benchmark: every variant this build has (each OpenCL variant on each
device) trained for N epochs with the same seed and batch, beside the PyTorch
peer, in one run. Writes a Markdown table, the raw JSON and a bar chart.

  bench/epoch_bench.py [--model lenet5|mlp|cnn|FILE] [--epochs 2] [--batch B]
                       [--variants cpu,avx,omp,...] [--devices 0,1] [--repeats 1]
                       [--peer cpu|cuda|none] [--binary build/lenet5] [--data DIR]
                       [--python PY] [--out bench/results] [--kernels DIR]

--model is passed to lenet5 train (default lenet5) and picks the peer:
bench/peers/pytorch_lenet5.py for lenet5, bench/peers/pytorch_models.py for mlp
and cnn (a model file has no peer). Without --batch, our runs take the model's
own batch (its train line) and the peer gets the batch our JSON reports. The
files are epochs.md/.json/.png for lenet5 and epochs-MODEL.* for the others.

--kernels DIR runs each OpenCL variant twice, with the embedded kernels and with
DIR's (`lenet5 train --kernels DIR`: an edited copy from `lenet5 kernels --dump`),
so that a kernel change is timed beside the original in one table.

Per run, the times are the median over its epochs; with --repeats R the
median over R runs. The R runs go in rounds: each round runs every variant once
and then the peer once, so that a busy minute on a shared machine slows all of
them alike rather than whichever ran then. Ratios are against the fastest
variant of ours (wall ms); with a peer, a note gives the peer's wall over ours
round by round (median, lowest, highest). A peer that is not installed is
skipped with a note, never faked.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST_VARIANTS = ("cpu", "avx", "omp")
OPENCL_VARIANTS = ("gpu", "gpu-constant", "gpu-local")
# The PyTorch peer of each built-in model, in bench/peers/.
PEERS = {"lenet5": "pytorch_lenet5.py", "mlp": "pytorch_models.py", "cnn": "pytorch_models.py"}


def fail(msg):
    sys.exit("epoch_bench: error: " + msg)


def built_variants(binary):
    """The variants compiled into the binary, from `lenet5 --version`."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("variants:"):
            return line.split()[1:]
    fail(binary + " --version does not list its variants")


def opencl_devices(binary):
    """[(index, description)] from `lenet5 devices`, or [] without OpenCL."""
    r = subprocess.run([binary, "devices"], capture_output=True, text=True)
    if r.returncode != 0:
        return []
    devices = []
    for line in r.stdout.splitlines():
        head = line.strip().split(None, 1)
        if head and head[0].rstrip(":").isdigit():
            devices.append((int(head[0].rstrip(":")), head[1] if len(head) > 1 else ""))
    return devices


def run_ours(binary, variant, device, kernels, args):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "run.json")
        cmd = [binary, "train", "--variant", variant, "--epochs", str(args.epochs)]
        if args.model != "lenet5":
            cmd += ["--model", args.model]
        if args.batch is not None:
            cmd += ["--batch", str(args.batch)]
        cmd += ["--seed", "1", "--json", report]
        if variant == "omp":  # the peer's thread count (the other variants run on one thread or a device)
            cmd += ["--threads", str(args.threads)]
        if device is not None:
            cmd += ["--device", str(device)]
        if kernels:
            cmd += ["--kernels", kernels]
        if args.data:
            cmd += ["--data", args.data]
        if args.train_limit:
            cmd += ["--train-limit", str(args.train_limit)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "exit %d" % r.returncode
        with open(report) as f:
            return json.load(f), None


def run_name(variant, device, kernels):
    name = variant if device is None else "%s #%d" % (variant, device)
    return name + (" (kernels %s)" % kernels if kernels else "")


PHASE_KEYS = ("forward_ms", "backward_ms", "update_ms", "transfer_ms", "wall_ms")


def run_medians(report):
    """One run's median per phase over its epochs."""
    return {k: statistics.median(e[k] for e in report["epochs"]) for k in PHASE_KEYS}


def summarise(reports):
    """Median per phase over the epochs of each run, then over the runs."""
    per_run = [run_medians(rep) for rep in reports]
    row = {k: statistics.median(run[k] for run in per_run) for k in PHASE_KEYS}
    row["test_accuracy"] = reports[-1]["final_test_accuracy"]
    row["device"] = reports[-1]["device"]
    row["platform"] = reports[-1]["platform"]
    return row


def run_peer(args, device, batch):
    """One run of the PyTorch peer of args.model at `batch` (None: the peer's default, the
    model's recipe). Returns (rows, note, the batch the peer ran)."""
    script = PEERS.get(args.model)
    if script is None:
        return [], "no PyTorch peer for model %s (peers: %s); peer skipped" % (args.model, ", ".join(sorted(PEERS))), batch
    cmd = [args.python, os.path.join(ROOT, "bench", "peers", script)]
    if script != "pytorch_lenet5.py":
        cmd += ["--model", args.model]
    cmd += ["--epochs", str(args.epochs)]
    if batch is not None:
        cmd += ["--batch", str(batch)]
    cmd += ["--threads", str(args.threads), "--device", device, "--repeats", "1"]
    if args.data:
        cmd += ["--data", args.data]
    if args.train_limit:
        cmd += ["--train-limit", str(args.train_limit)]
    rows = []
    for graphs in ([False, True] if device == "cuda" else [False]):
        r = subprocess.run(cmd + (["--cuda-graphs"] if graphs else []), capture_output=True, text=True)
        if r.returncode == 3:
            return [], "PyTorch is not installed (apt-get install python3-torch); peer skipped", batch
        if r.returncode != 0:
            return rows, "PyTorch peer failed: " + (r.stderr.strip().splitlines() or ["?"])[-1], batch
        lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
        summary = next(l for l in lines if l.get("summary"))
        epochs = [l for l in lines if not l.get("summary")]
        rows.append({"name": "pytorch " + device + (" + CUDA graphs" if graphs else ""),
                     "wall_ms": 1000.0 * summary["median_seconds"],
                     "test_accuracy": epochs[-1]["test_accuracy"],
                     "device": summary.get("device_name", device),
                     "torch": summary.get("torch", "?")})
        if batch is None:
            batch = summary.get("batch")
    return rows, None, batch


def model_stem(model):
    """mlp -> mlp; models/my net.net -> my_net (for the output file names)."""
    base = os.path.splitext(os.path.basename(model))[0] or "model"
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in base)


def write_chart(rows, path_png):
    if not shutil.which("gnuplot"):
        return "gnuplot not installed (apt-get install gnuplot-nox): no chart"
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as dat:
        for r in rows:
            label = r["name"].replace(" ", "_")
            dat.write("%s %.3f %.3f %.3f %.3f\n" % (label, r.get("forward_ms", 0) / 1000, r.get("backward_ms", 0) / 1000,
                                                    r.get("update_ms", 0) / 1000, r["wall_ms"] / 1000))
    script = """
set terminal pngcairo size 1100,600 noenhanced
set output '%s'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel 'seconds per epoch'
set logscale y
set grid ytics
set xtics rotate by -30
set key top right
plot '%s' using 2:xtic(1) title 'forward', '' using 3 title 'backward', '' using 4 title 'update', '' using 5 title 'wall'
""" % (path_png, dat.name)
    r = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
    os.unlink(dat.name)
    return None if r.returncode == 0 else "gnuplot failed: " + r.stderr.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "lenet5"))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--model", default="lenet5",
                    help="lenet5, mlp, cnn or a model file, passed to lenet5 train (default lenet5)")
    ap.add_argument("--batch", type=int, default=None, help="default: the model's own batch")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="threads of omp and of the CPU peer (default: all cores)")
    ap.add_argument("--variants", default="", help="comma-separated; default: all this build has")
    ap.add_argument("--devices", default="", help="OpenCL device indices; default: all")
    ap.add_argument("--peer", choices=("cpu", "cuda", "none"), default="cpu")
    ap.add_argument("--data", default="")
    ap.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable,
                    help="the interpreter that has PyTorch (Debian's python3-torch is for /usr/bin/python3)")
    ap.add_argument("--train-limit", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--kernels", default="", help="also run each OpenCL variant with this folder's kernel files")
    args = ap.parse_args()
    if not os.access(args.binary, os.X_OK):
        fail(args.binary + " not found; build first (./setup.sh)")
    if args.epochs < 1 or (args.batch is not None and args.batch < 1) or args.repeats < 1:
        fail("--epochs, --batch and --repeats must be at least 1")

    variants = args.variants.split(",") if args.variants else built_variants(args.binary)
    devices = opencl_devices(args.binary)
    if args.devices:
        wanted = {int(d) for d in args.devices.split(",")}
        devices = [d for d in devices if d[0] in wanted]
    runs = []
    for v in variants:
        for device in ([d[0] for d in devices] if v in OPENCL_VARIANTS else [None]):
            runs.append((run_name(v, device, None), v, device, None))
            if args.kernels and v in OPENCL_VARIANTS:
                runs.append((run_name(v, device, args.kernels), v, device, args.kernels))

    rows, notes = [], []
    batch = args.batch                                 # None: the model's, from our first report
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    reports = {run[0]: [] for run in runs}             # a name's runs, one a round
    failed = set()
    peer_runs, peer_note = {}, None                    # the peer's rows by name, one a round
    for rnd in range(args.repeats):
        print("epoch_bench: round %d of %d ..." % (rnd + 1, args.repeats), file=sys.stderr, flush=True)
        for name, variant, device, kernels in runs:
            if name in failed:
                continue
            rep, err = run_ours(args.binary, variant, device, kernels, args)
            if err:
                notes.append("%s: %s" % (name, err))
                failed.add(name)
                continue
            reports[name].append(rep)
            if batch is None:
                batch = rep.get("batch")
        if args.peer != "none" and peer_note is None:
            peer_rows, peer_note, batch = run_peer(args, args.peer, batch)
            for r in peer_rows:
                peer_runs.setdefault(r["name"], []).append(r)
    for name, reps in reports.items():
        if reps:
            row = summarise(reps)
            row["name"] = name
            rows.append(row)
    for name, by_round in peer_runs.items():
        rows.append(dict(by_round[-1], wall_ms=statistics.median(r["wall_ms"] for r in by_round)))
        for ours_name, reps in reports.items():
            pairs = list(zip(by_round, reps))          # round k's runs (a failed run ends its list)
            if not pairs:
                continue
            ratios = sorted(p["wall_ms"] / run_medians(o)["wall_ms"] for p, o in pairs)
            notes.append("%s / %s, round by round: %.2fx median (%.2fx-%.2fx over %d)" %
                         (name, ours_name, statistics.median(ratios), ratios[0], ratios[-1], len(ratios)))
    if peer_note:
        notes.append(peer_note)
    if not rows:
        fail("nothing ran: " + "; ".join(notes))

    ours = [r for r in rows if not r["name"].startswith("pytorch")]
    fastest = min(ours, key=lambda r: r["wall_ms"]) if ours else None
    lines = ["Epoch benchmark, %s: model %s, batch %s, %d epoch(s), median of %d run(s), seed 1%s." %
             (started, args.model, batch if batch is not None else "(the model's)", args.epochs, args.repeats,
              ", first %d training images" % args.train_limit if args.train_limit else ""),
             "", "| variant | device | forward ms | backward ms | update ms | wall ms | test acc | wall vs %s |" %
             (fastest["name"] if fastest else "-"),
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ratio = r["wall_ms"] / fastest["wall_ms"] if fastest else 0
        fmt = lambda k: "%.1f" % r[k] if k in r else "-"
        lines.append("| %s | %s | %s | %s | %s | %.1f | %.2f%% | %.2fx |" %
                     (r["name"], r["device"], fmt("forward_ms"), fmt("backward_ms"), fmt("update_ms"),
                      r["wall_ms"], 100 * r["test_accuracy"], ratio))
    lines += [""] + ["Note: " + n for n in notes]
    os.makedirs(args.out, exist_ok=True)
    stem = "epochs" if args.model == "lenet5" else "epochs-" + model_stem(args.model)
    chart_note = write_chart(rows, os.path.join(args.out, stem + ".png"))
    if chart_note:
        lines.append("Note: " + chart_note)
    table = "\n".join(lines) + "\n"
    for name, text in ((stem + ".md", table), (stem + ".json", json.dumps(rows, indent=2) + "\n")):
        tmp = os.path.join(args.out, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(args.out, name))
    print(table)


if __name__ == "__main__":
    main()
