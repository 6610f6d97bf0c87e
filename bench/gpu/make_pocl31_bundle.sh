#!/usr/bin/env bash
# Packs this Debian 12 machine's PoCL 3.1 (libpocl2, LLVM 15) for bench/gpu/pocl31_probe.sh, so that
# it runs on the lent GPU machine's AVX-512 CPU: OUT/pocl31.tar.xz (about 54 MB, paths as installed
# here, the libraries the GPU machine lacks under deplibs/) and OUT/mnist (6,000 training and 1,000
# test images, gzipped IDX).
#   bench/gpu/make_pocl31_bundle.sh OUT
set -euo pipefail
out=$(realpath -m "${1:?output folder}")
src=$(realpath "$(dirname "$0")/../..")
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
for f in /usr/lib/x86_64-linux-gnu/libpocl.so.2 /usr/lib/x86_64-linux-gnu/libpocl.so.2.10.0 /usr/lib/x86_64-linux-gnu/pocl \
         /usr/share/pocl/include /usr/share/pocl/kernel-x86_64-pc-linux-gnu-avx512.bc /usr/lib/llvm-15/bin/clang-15 \
         /usr/lib/llvm-15/bin/clang /usr/lib/x86_64-linux-gnu/libLLVM-15.so.1 /usr/lib/llvm-15/lib/libclang-cpp.so.15 \
         /usr/lib/llvm-15/lib/clang/15.0.6/include; do
    cp -a --parents "$f" "$root/"
done
mkdir -p "$root/deplibs" "$out/mnist"
ldd /usr/lib/x86_64-linux-gnu/libpocl.so.2 /usr/lib/llvm-15/bin/clang-15 | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libLLVM-15|libclang-cpp)\.so' |
    while read -r lib; do cp -L "$lib" "$root/deplibs/"; done
tar -C "$root" -cf - . | xz -6 -T0 > "$out/pocl31.tar.xz"
python3 - "$src/data/mnist" "$out/mnist" <<'PY'
import gzip, os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
for name, n in [("train-images-idx3-ubyte", 6000), ("train-labels-idx1-ubyte", 6000),
                ("t10k-images-idx3-ubyte", 1000), ("t10k-labels-idx1-ubyte", 1000)]:
    path = os.path.join(src, name)
    data = open(path, "rb").read() if os.path.exists(path) else gzip.open(path + ".gz").read()
    dims = data[3]
    shape = list(struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims]))
    item = 1
    for d in shape[1:]:
        item *= d
    shape[0] = n
    body = data[4 + 4 * dims:4 + 4 * dims + n * item]
    gzip.open(os.path.join(dst, name + ".gz"), "wb").write(data[:4] + struct.pack(">" + "I" * dims, *shape) + body)
PY
du -sh "$out/pocl31.tar.xz" "$out/mnist"
