#!/usr/bin/env bash
# Where a LeNet-5 training step's time goes, layer by layer, on a GPU, from a bundle
# (bench/gpu/make_gpu_bundle.sh), through the kernel lab:
#   bench/gpu/layer_profile_gpu.sh BUNDLE_DIR [BATCH:GROUP ...]     (default 64:1024 256:256)
# --kernel-profile sees whole kernels only, and step_samples runs every layer. So this dumps the
# kernels, makes copies in which one layer function returns at once (or part of one: the pairs'
# backward is cut before each of its steps), and times a step of each copy with `lenet5 tune`
# (gpu-local, the given items per sample, median of 3 runs of STEPS steps, default 300). A cut's
# saving is what the layer (or the rest of the function from the cut) costs a step; its results
# are wrong, so only its time is used. Prints a table per batch.
bench=$(dirname "$(realpath "$0")")
source "$bench/bundle_env.sh" "${1:?usage: bench/gpu/layer_profile_gpu.sh BUNDLE_DIR [BATCH:GROUP ...]}"
shift
cases=("${@:-64:1024}")
[ $# -eq 0 ] && cases=(64:1024 256:256)
steps=${STEPS:-300}
dev=$("$bench/gpu_device.sh" ./lenet5) || exit 1
echo "device $dev: $(./lenet5 devices | grep "^$dev:")"
L=$(mktemp -d)
trap 'rm -rf "$L"' EXIT
./lenet5 kernels --dump "$L/full" >/dev/null || exit 1

# cut NAME ANCHOR CONDITION: a copy whose sample_layers.cl returns where CONDITION holds (a literal
# shape of the layer's call) just before the first line containing ANCHOR.
cuts=()
cut() {
    local name=$1 anchor=$2 cond=$3
    cp -r "$L/full" "$L/$name"
    awk -v a="$anchor" -v c="$cond" 'index($0, a) && !done { print "    if (" c ") return;"; done = 1 } { print }' \
        "$L/full/sample_layers.cl" > "$L/$name/sample_layers.cl"
    grep -qF "if ($cond) return;" "$L/$name/sample_layers.cl" || { echo "cut $name: no line '$anchor'"; exit 1; }
    cuts+=("$name")
}
# Each layer function's first line, as far as it names the function's shape arguments.
pf='const int lid = (int)get_local_id(0), C = CH * CW,'
ff='const int lid = (int)get_local_id(0), lane = lid % FC_ITEMS,'
fb='const int lid = (int)get_local_id(0), vec = I % 4 == 0 ? 4 : 1, columns = I / vec;'
pb='const int lid = (int)get_local_id(0), M = IH * IW, C = CH * CW,'
cut fwd-C1S2 "$pf" "IH == 32"
cut fwd-C3S4 "$pf" "IH == 14"
cut fwd-C5 "$ff" "I == 400"
cut fwd-F6 "$ff" "I == 120"
cut fwd-out "$ff" "I == 84"
cut bwd-out "$fb" "I == 84"
cut bwd-F6 "$fb" "I == 120"
cut bwd-C5 "$fb" "I == 400"
for pair in C3S4:14 C1S2:32; do
    p=${pair%%:*} ih=${pair##*:}
    cut "bwd-$p-all" "$pb" "IH == $ih"
    cut "bwd-$p-from-taps" "// 2a. The weights" "IH == $ih"
    cut "bwd-$p-from-sums" "// 2b. Each map's conv bias" "IH == $ih"
done
cut bwd-C3S4-input-delta "if (!has_prev) return;" "IH == 14"  # C1 passes no delta down

step_us() {  # step_us KERNEL_DIR BATCH GROUP: microseconds per step
    ./lenet5 tune --device "$dev" --variant gpu-local --batch "$2" --groups "$3" --steps "$steps" \
        --cache "$L/cache.tsv" --kernels "$1" 2>&1 | awk -v g="$3" '$1 == g && NF == 2 {print $2}'
}
for c in "${cases[@]}"; do
    batch=${c%%:*} group=${c##*:}
    full=$(step_us "$L/full" "$batch" "$group")
    [ -n "$full" ] || { echo "timing the unmodified kernels failed"; exit 1; }
    echo
    echo "batch $batch, $group items per sample: $full us per step unmodified ($steps steps x 3 runs, median)"
    printf '  %-26s %10s %10s\n' cut "us/step" saving
    for name in "${cuts[@]}"; do
        t=$(step_us "$L/$name" "$batch" "$group")
        printf '  %-26s %10s %10s\n' "$name" "${t:-failed}" "$(awk -v f="$full" -v t="$t" 'BEGIN {if (t != "") printf "%.1f", f - t}')"
    done
done
