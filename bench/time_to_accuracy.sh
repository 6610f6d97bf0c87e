#!/usr/bin/env bash
# Time to 99.0% test accuracy (issue 48), measured as MLPerf and DAWNBench do: LeNet-5 with the
# recipe models/lenet5-fast.net trained until the first evaluation at or above the target, one run
# per seed, ours beside PyTorch with the same recipe, seeds and evaluation points
# (bench/peers/pytorch_tta.py). Prints a row per seed, then the median and the spread (lowest,
# highest) of the training seconds to the target; evaluations are not counted, as in
# `lenet5 train --target-accuracy` (the JSON's time_to_accuracy.train_seconds).
#
#   bench/time_to_accuracy.sh cpu [BINARY [OUT_DIR]]   variant omp (default build/lenet5) beside
#                                                     PyTorch on the CPU (/usr/bin/python3, 2 threads)
#   bench/time_to_accuracy.sh gpu BUNDLE_DIR [OUT_DIR] on a lent GPU machine, from a bundle
#                                                     (bench/gpu/make_gpu_bundle.sh): gpu-local beside
#                                                     PyTorch on CUDA with CUDA graphs
#
# Environment: SEEDS (default "1 2 3 4 5"), TARGET (99%), EVAL_EVERY (steps between evaluations,
# counted from the first step; default a tenth of an epoch at the recipe's batch, 6000 / batch: 23
# at 256), MODEL (the recipe, default models/lenet5-fast.net), VARIANT (cpu: omp, gpu: gpu-local),
# THREADS (the peer's on the CPU, 2), PYTHON (cpu: /usr/bin/python3, Debian's python3-torch; gpu:
# python3). The runs alternate, ours then the peer for each seed, so that a busy minute on a shared
# machine slows both. Each run's JSON (ours: --json; the peer: its output lines) is kept in OUT_DIR
# (default: a temporary folder, removed). A peer that is not installed (exit 3) is skipped with a
# note. OMP_WAIT_POLICY is passive unless set: ours and Debian's torch both use libgomp, whose
# spinning threads lose their cores to any other work on a shared machine (a LeNet-5 epoch of `omp`
# 7x slower, PyTorch's 5x, beside two other builds); passive keeps both near their quiet speed, and
# is printed with the results.
set -uo pipefail
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mode=${1:-}
bench=$(dirname "$(realpath "$0")")
root=$(dirname "$bench")
model=$(realpath "${MODEL:-$root/models/lenet5-fast.net}")
seeds=${SEEDS:-1 2 3 4 5}
target=${TARGET:-99%}
recipe_batch=$(grep -m1 -oE '^train .*batch=[0-9]+' "$model" | grep -oE '[0-9]+$')
every=${EVAL_EVERY:-$((6000 / ${recipe_batch:-64}))}
usage="usage: bench/time_to_accuracy.sh cpu [BINARY [OUT_DIR]] | gpu BUNDLE_DIR [OUT_DIR]"
case "$mode" in
    cpu)
        bin=$(realpath "${2:-$root/build/lenet5}")
        out=${3:-}
        variant=${VARIANT:-omp}
        python=${PYTHON:-/usr/bin/python3}
        data=${LENET5_DATA:-$root/data/mnist}
        ours_dev=()
        peer_dev=(--device cpu --threads "${THREADS:-2}")
        ;;
    gpu)
        bundle=${2:?$usage}
        out=${3:-}
        [ -n "$out" ] && out=$(realpath -m "$out")
        variant=${VARIANT:-gpu-local}
        python=${PYTHON:-python3}
        source "$bench/gpu/bundle_env.sh" "$bundle"  # enters the bundle
        bin=$PWD/lenet5
        data=$PWD/mnist
        dev=$("$bench/gpu/gpu_device.sh" "$bin") || exit 1
        ours_dev=(--device "$dev")
        peer_dev=(--device cuda --cuda-graphs)
        ;;
    *) echo "$usage" >&2; exit 2 ;;
esac
[ -x "$bin" ] || { echo "time_to_accuracy: error: $bin is not an executable (build lenet5)" >&2; exit 1; }
keep=1
if [ -z "$out" ]; then out=$(mktemp -d); keep=0; fi
mkdir -p "$out"
out=$(realpath "$out")

echo "== time to $target: $(basename "$model") ($mode), seeds $seeds, evaluations every $every steps"
echo "date $(date -u '+%Y-%m-%d %H:%M UTC'); host $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
[ "$mode" = gpu ] && { echo "device $dev: $("$bin" devices | grep "^$dev:")"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null; }
echo "ours: $bin train --model $(basename "$model") --variant $variant ${ours_dev[*]:+${ours_dev[*]} }--seed S --target-accuracy $target --eval-every $every"
echo "peer: $python bench/peers/pytorch_tta.py --recipe $(basename "$model") ${peer_dev[*]} --seed S --target $target --eval-every $every"
grep '^train' "$model"
peer_ok=1
for s in $seeds; do
    "$bin" train --model "$model" --variant "$variant" "${ours_dev[@]}" --seed "$s" --data "$data" \
        --target-accuracy "$target" --eval-every "$every" --json "$out/ours_s$s.json" >"$out/ours_s$s.txt" 2>&1 ||
        { echo "time_to_accuracy: error: ours failed on seed $s:"; tail -n 3 "$out/ours_s$s.txt"; exit 1; } >&2
    if [ $peer_ok = 1 ]; then
        "$python" "$bench/peers/pytorch_tta.py" --recipe "$model" "${peer_dev[@]}" --seed "$s" --data "$data" \
            --target "$target" --eval-every "$every" >"$out/peer_s$s.jsonl" 2>"$out/peer_s$s.err"
        rc=$?
        if [ $rc = 3 ]; then
            peer_ok=0
            echo "note: the PyTorch peer is skipped: $(tail -n 1 "$out/peer_s$s.err")"
        elif [ $rc != 0 ]; then
            echo "time_to_accuracy: error: the peer failed on seed $s: $(tail -n 1 "$out/peer_s$s.err")" >&2
            exit 1
        fi
    fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$seeds" <<'EOF'
import json, os, statistics, sys
out, seeds = sys.argv[1], sys.argv[2].split()

def ours(s):
    j = json.load(open(os.path.join(out, "ours_s%s.json" % s)))
    t = j["time_to_accuracy"]
    full = [e["wall_ms"] / 1000 for e in j["epochs"]][:int(t["epoch"])]  # the whole epochs
    return t["reached"], t["epoch"], t["train_seconds"], full, j.get("device", "")

def peer(s):
    path = os.path.join(out, "peer_s%s.jsonl" % s)
    if not os.path.exists(path) or not os.path.getsize(path):
        return None
    rows = [json.loads(line) for line in open(path) if line.strip()]
    t = rows[-1]
    return t["reached"], t["epoch"], t["train_seconds"], t["epoch_seconds"][:int(t["epoch"])], t["device_name"]

def cell(r):
    return ("%.2f ep  %7.3f s" % (r[1], r[2])) if r and r[0] else ("not reached (%.2f ep)" % r[1] if r else "-")

O = {s: ours(s) for s in seeds}
P = {s: peer(s) for s in seeds}
print("\n| seed | ours: epochs, seconds to target | PyTorch: epochs, seconds | PyTorch / ours |")
print("|---|---|---|---|")
for s in seeds:
    o, p = O[s], P[s]
    ratio = "%.1fx" % (p[2] / o[2]) if o[0] and p and p[0] else "-"
    print("| %s | %s | %s | %s |" % (s, cell(o), cell(p), ratio))

def stats(rows, name):
    got = [r for r in rows if r and r[0]]
    if not got:
        print("%s: never reached the target" % name)
        return None
    secs = sorted(r[2] for r in got)
    eps = sorted(r[1] for r in got)
    epoch_s = [x for r in rows if r for x in r[3]]
    print("%s: reached in %d of %d seeds; seconds median %.3f (lowest %.3f, highest %.3f); epochs median %.2f "
          "(%.2f-%.2f); a whole epoch's training %s"
          % (name, len(got), len(rows), statistics.median(secs), secs[0], secs[-1], statistics.median(eps),
             eps[0], eps[-1], "%.3f s (median)" % statistics.median(epoch_s) if epoch_s else "- (none whole)"))
    return statistics.median(secs)

print()
mo = stats([O[s] for s in seeds], "ours (%s)" % O[seeds[0]][4])
mp = stats([P[s] for s in seeds], "PyTorch (%s)" % (P[seeds[0]][4] if P[seeds[0]] else "skipped")) \
    if any(P.values()) else None
if mo and mp:
    print("PyTorch / ours, medians: %.1fx" % (mp / mo))
EOF
if [ $keep = 1 ]; then echo "runs in $out"; else rm -rf "$out"; fi
