#!/usr/bin/env bash
# Every OpenCL kernel that training and inference launch, run under Oclgrind (issue 47): a case
# passes only when the program succeeds and Oclgrind reports nothing.
#
#   tests/oclgrind_kernels.sh --list                   the cases, one a line
#   tests/oclgrind_kernels.sh LENET5 SOURCE_DIR CASE   run one case (ctest runs each as its own test)
#
# A case is KIND/MODEL/VARIANT[/PATH][/ALGO]:
#   check   `lenet5 check` (the variant's training steps against cpu) on a batch of 2 MNIST
#           images layer by layer, then 2 steps as train runs them (the first a probe, the second
#           fused) (b1: batches of 1, the MLP's own batch, which the per-sample engine fuses and
#           runs persistently: 8 steps a training path);
#   infer   `lenet5 infer --model CHECKPOINT` on a batch of 2 random images (the checkpoint
#           made by a one-step `train --variant cpu`);
#   onnx    `lenet5 infer --onnx` of tests/data/onnx's models on a batch of 2 random images;
# PATH sample|batch forces the engine (LENET5_OPENCL_PATH); ALGO is --conv-algo (CLBlast's own
# kernels are left out). Models: lenet5, mlp, and tests/data/cnn_small.net (models/cnn.net's layers
# on smaller shapes: cnn's FC of 6.4M weights takes 7 minutes a step under Oclgrind),
# tests/data/vgg_small.net (a small VGG-like chain), tests/data/winograd_small.net (the Winograd
# convolution's training kernels on the smallest shapes) and tests/data/dropout_small.net (the
# generic kernels of a layer kind's own, cl_kernels/layers/).
#
# Oclgrind's checks: --data-races (races between work-items and groups) on top of its default ones
# (out-of-bounds reads and writes of buffers and of __local/private arrays, barrier divergence, the
# runtime API's errors, --check-api). --uninitialized is not run: Debian's Oclgrind 21.10 stops at
# the first kernel (images_to_inputs) with "OCLGRIND FATAL ERROR (Uninitialized.cpp:1805)
# Unsupported instruction: freeze", an instruction that its LLVM's clang emits for our kernels.
#
# The simulated device has PoCL's limits (on the CPUs that CI's other OpenCL tests run on), so that
# the engines plan as they do there: 512 KiB of __constant memory (Oclgrind's 64 KiB refuses
# gpu-constant's batch-level LeNet-5: C5's 192480 bytes of parameters) and 512 KiB of __local memory
# instead of Oclgrind's 32 KiB, which is also needed past an error of Oclgrind's own (proof below)
# that several of our kernels cannot pass at 32 or 64 KiB. The engines' own checks of the device's
# limits stay.
#   Oclgrind 21.10 (and its master, 26.03) charges a kernel with every __local variable whose LLVM
#   name starts with the kernel's name (src/core/Kernel.cpp, Kernel::Kernel: `if
#   (!itr->getName().startswith(m_name)) continue;`). Clang names a kernel's __local array
#   KERNEL.VAR, so conv_forward is charged with conv_forward_fast.plane (CONV_PLANE = 4096 floats)
#   and conv_forward_fast.wl (CONV_FW = 4096) beside its own conv_forward.wl (CONV_LOCAL_FLOATS =
#   400 for LeNet-5's C5): 4 * (400 + 4096 + 4096) = 34368 bytes, the number in Oclgrind's
#   "total local memory size (34368) exceeds device maximum of 32768", and the launch fails with
#   CL_OUT_OF_RESOURCES. conv_forward itself uses 1600 bytes. gemm (with gemm_fast_*, gemm_skinny_*,
#   gemm_reduce), sum_rows (sum_rows32) and cv_direct_m* (cv_direct_m*_k3) are charged the same way:
#   `infer --variant gpu` of LeNet-5 fails at 64 KiB with "total local memory size (209280)".
set -euo pipefail

variants="gpu gpu-constant gpu-local"

# The convolution algorithms' kernels (conv.cl) are built the same for every variant: they run on
# gpu-local only; each variant runs the engine's own kernels.
list_cases() {
    for v in $variants; do
        # LeNet-5 and the MLP fit either engine: both are run.
        echo "check/lenet5/$v/sample"
        echo "check/lenet5/$v/batch"
        echo "check/mlp/$v/sample"
        echo "check/mlp/$v/sample/b1"
        echo "check/mlp/$v/batch"
        echo "check/cnn_small/$v"
        echo "check/dropout_small/$v"
        # vgg_small's training on gpu-constant does not end within 10 minutes under Oclgrind; every
        # kernel it launches there (`lenet5 kernels`) runs in lenet5's and cnn_small's cases.
        [[ $v != gpu-constant ]] && echo "check/vgg_small/$v"
        for m in lenet5 mlp vgg_small; do echo "infer/$m/$v"; done
        echo "onnx/small/$v"
    done
    # Inference of these runs the kernels above on each variant: gpu-local is enough.
    echo "infer/cnn_small/gpu-local"
    echo "infer/dropout_small/gpu-local"
    echo "onnx/mnist_cnn/gpu-local"
    # LeNet-5's C1 and C5 through conv.cl take over 5 minutes each under Oclgrind: the algorithms
    # run on cnn_small's and vgg_small's layers.
    for a in direct im2col; do
        echo "check/cnn_small/gpu-local/$a"
        echo "infer/cnn_small/gpu-local/$a"
    done
    # vgg_small's training through im2col or winograd takes over 10 minutes under Oclgrind (the
    # weight gradients' GEMM in 128x128 tiles): im2col's training kernels run on cnn_small above,
    # winograd's on tests/data/winograd_small.net (7x7 maps), about 2 minutes.
    echo "check/vgg_small/gpu-local/direct"
    echo "check/winograd_small/gpu-local/winograd"
    for a in direct im2col winograd; do echo "infer/vgg_small/gpu-local/$a"; done
}

if [[ ${1:-} == --list ]]; then
    list_cases
    exit 0
fi
if (($# != 3)); then
    echo "usage: $0 --list | LENET5 SOURCE_DIR CASE" >&2
    exit 2
fi
lenet5=$(realpath "$1")
src=$(realpath "$2")
case_name=$3
command -v oclgrind >/dev/null || { echo "oclgrind is not installed (apt-get install oclgrind)"; exit 1; }

IFS=/ read -r kind model variant rest <<<"$case_name"
path="" algo="" batch=2 batches=1
IFS=/ read -ra extra <<<"${rest:-}"
for e in "${extra[@]}"; do
    case $e in
        sample | batch) path=$e ;;
        b1) batch=1 ;;
        own | direct | im2col | winograd) algo=$e ;;
        *) echo "unknown case part '$e' in $case_name" >&2; exit 2 ;;
    esac
done
data=${LENET5_DATA:-$src/data/mnist}
model_arg=$model
[[ $model == *_small ]] && model_arg=$src/tests/data/$model.net

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The defaults, not whatever `lenet5 tune` cached on this machine.
export LENET5_TUNING=$work/tuning.tsv LENET5_CONV_TUNING=$work/conv-tuning.tsv
unset LENET5_KERNELS LENET5_CL_OPTIONS LENET5_OPENCL_PATH
[[ -n $path ]] && export LENET5_OPENCL_PATH=$path

args=()
case $kind in
    check)
        args=(check --model "$model_arg" --variant "$variant" --batch "$batch" --batches "$batches"
              --data "$data")
        [[ -n $algo ]] && args+=(--conv-algo "$algo")
        ;;
    infer)
        # The checkpoint from one step on the host (its weights are what matters, not how good they are).
        "$lenet5" train --model "$model_arg" --variant cpu --epochs 1 --batch 4 --train-limit 4 --test-limit 4 \
            --data "$data" --save "$work/model.ckpt" >"$work/train.log" 2>&1 ||
            { cat "$work/train.log"; exit 1; }
        args=(infer --model "$work/model.ckpt" --variant "$variant" --random 2 --batch 2)
        [[ -n $algo ]] && args+=(--conv-algo "$algo")
        ;;
    onnx)
        args=(infer --onnx "$src/tests/data/onnx/$model.onnx" --variant "$variant" --random 2 --batch 2)
        [[ -n $algo ]] && args+=(--conv-algo "$algo")
        ;;
    *) echo "unknown case kind '$kind'" >&2; exit 2 ;;
esac

echo "oclgrind --data-races lenet5 ${args[*]}  (LENET5_OPENCL_PATH=${path:-auto})"
set +e
oclgrind --data-races --check-api --local-mem-size 524288 --constant-mem-size 524288 --num-threads 1 "$lenet5" "${args[@]}" >"$work/out.log" 2>&1
status=$?
set -e
cat "$work/out.log"
# Oclgrind's reports: its error and warning headers ("Invalid read of size 4 ...", "Read-write data
# race at ...", "Oclgrind - OpenCL runtime error detected", "Index (-75) exceeds static array size",
# "Work-group divergence detected", "Uninitialized value ...", "Unhandled instruction ...").
reports=$(grep -cE '^(Invalid (read|write)|Invalid access|.*data race at|Oclgrind - |Oclgrind: |Index \(|Work-group divergence|Work-item finished|Uninitialized|Unhandled|Unsupported|Unaligned|.*exceeds static array)' \
    "$work/out.log" || true)
if ((status != 0 || reports != 0)); then
    echo "FAIL $case_name: exit status $status, $reports Oclgrind report(s)"
    exit 1
fi
echo "PASS $case_name"
