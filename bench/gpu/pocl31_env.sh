# Sourced by the scripts that run Debian 12's PoCL 3.1 on a lent GPU machine's AVX-512 CPU
# (bench/gpu/pocl31_probe.sh, bench/gpu/pocl31_tests.sh): unpacks PROBE_DIR/pocl31.tar.xz
# (bench/gpu/make_pocl31_bundle.sh) over / and makes it the only OpenCL platform the loader sees.
#   source "$(dirname "$(realpath "$0")")/pocl31_env.sh" BUNDLE PROBE_DIR
# Leaves bundle and probe set to the two folders' absolute paths; unpacks PROBE_DIR/bundle.tar.xz into
# BUNDLE when BUNDLE has no lenet5 (a packed bundle saves carry room).
bundle=$(realpath -m "${1:?bundle folder}") probe=$(realpath "${2:?probe folder}")
[[ -f $probe/bundle.tar.xz && ! -x $bundle/lenet5 ]] && mkdir -p "$bundle" && tar -C "$bundle" -xJf "$probe/bundle.tar.xz"
tar -C / -xJf "$probe/pocl31.tar.xz"
mkdir -p /tmp/pocl31-vendors && echo /usr/lib/x86_64-linux-gnu/libpocl.so.2 > /tmp/pocl31-vendors/pocl.icd
export OCL_ICD_VENDORS=/tmp/pocl31-vendors OCL_ICD_FILENAMES=/usr/lib/x86_64-linux-gnu/libpocl.so.2
export LD_LIBRARY_PATH=$bundle/lib:/deplibs:/usr/lib/llvm-15/lib
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) | $(grep -o 'avx512[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
