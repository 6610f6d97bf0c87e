#!/usr/bin/env bash
# Builds what a lent GPU machine needs to run lenet5 (it has an OpenCL loader, PoCL and NVIDIA's
# driver, but no OpenCL headers and few of our libraries) into one folder small enough to carry:
#   bench/gpu/make_gpu_bundle.sh [SOURCE_DIR [OUT_DIR]]     (defaults: this checkout, build-gpu)
# OUT_DIR/lenet5 and OUT_DIR/lenet5_exchange_bench (for bench/gpu/exchange_gpu.sh), OUT_DIR/lib/ (the
# shared libraries they link beyond glibc, libstdc++ and the OpenCL loader: run them with
# LD_LIBRARY_PATH=OUT_DIR/lib) and OUT_DIR/mnist/*.gz. Built without
# OpenBLAS (35 MB; only the host variants' inference uses it), MPI, tests and the other benchmarks.
# With LENET5_BUNDLE_MPI=1 also OUT_DIR/lenet5-mpi, built with MPI, for `mpirun` on a machine with
# Open MPI 4.1 (the lent multi-GPU one): it takes that machine's MPI libraries, not copies of ours.
# With LENET5_BUNDLE_TESTS=1 also OUT_DIR/lenet5_tests, the unit tests (bench/gpu/pocl31_tests.sh).
set -euo pipefail
src=$(realpath "${1:-$(dirname "$0")/../..}")
out=$(realpath -m "${2:-$src/build-gpu}")
binaries=(lenet5 lenet5_exchange_bench)
tests=OFF
[[ ${LENET5_BUNDLE_TESTS:-0} == 1 ]] && tests=ON && binaries+=(lenet5_tests)
cmake -S "$src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DLENET5_OPENBLAS=OFF -DLENET5_MPI=OFF \
      -DLENET5_TESTS=$tests -DLENET5_BENCH=ON >/dev/null
cmake --build "$out/build" -j "$(nproc)" --target "${binaries[@]}"
for b in "${binaries[@]}"; do cp "$out/build/$b" "$out/"; done
binaries=("${binaries[@]/#/$out/}")
mpi_libs='^$'
if [[ ${LENET5_BUNDLE_MPI:-0} == 1 ]]; then
    cmake -S "$src" -B "$out/build-mpi" -DCMAKE_BUILD_TYPE=Release -DLENET5_OPENBLAS=OFF -DLENET5_MPI=ON \
          -DLENET5_TESTS=OFF -DLENET5_BENCH=OFF >/dev/null
    cmake --build "$out/build-mpi" -j "$(nproc)" --target lenet5
    cp "$out/build-mpi/lenet5" "$out/lenet5-mpi"
    binaries+=("$out/lenet5-mpi")
    # libmpi and everything it loads come from the machine that runs it
    mpi_libs=$(ldd "$out/lenet5-mpi" | awk '/libmpi/{print $3}' | xargs -r ldd | awk '/=> \//{print $1}' |
               cat - <(echo libmpi.so) | sed 's/\.so.*//' | sort -u | paste -sd'|')
fi
mkdir -p "$out/lib" "$out/mnist"
ldd "${binaries[@]}" | awk '/=> \//{print $3}' |
    grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libOpenCL|ld-linux[^/]*)\.so' |
    grep -vE "/($mpi_libs)\.so" |
    sort -u | while read -r lib; do cp -L "$lib" "$out/lib/"; done
data="${LENET5_DATA:-$src/data/mnist}"
for f in "$data"/*-ubyte*; do
    name=$(basename "$f" .gz)
    [[ -f "$out/mnist/$name.gz" ]] || { [[ $f == *.gz ]] && cp "$f" "$out/mnist/" || gzip -c "$f" > "$out/mnist/$name.gz"; }
done
du -sh "$out/lenet5" "$out/lib" "$out/mnist"
