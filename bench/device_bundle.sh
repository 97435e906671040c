#!/bin/bash
# Copies what mccl's benchmarks need to run on a machine without Debian's
# packages into one folder: mccl-bench, mccl_check, libmccl.so.0 and the
# libraries ldd lists that a stock distribution lacks (CAF, ISA-L, Highway).
# Run the binaries there with LD_LIBRARY_PATH set to the folder (their
# RUNPATH points at this build tree). tools/mcclrun and mccl_hosts.py come
# along. For PyTorch there, torch/ holds the Python package's and the
# extension's sources and bench/build_torch_ext.py, which builds mccl._C
# against that machine's torch: `python3 OUT_DIR/torch/build_torch_ext.py`
# writes OUT_DIR/python/mccl (then PYTHONPATH=OUT_DIR/python).
#
#   bench/device_bundle.sh [BUILD_DIR] [OUT_DIR]    (defaults: build out/device)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=${1:-build}
out=${2:-out/device}
mkdir -p "$out"
bins=("$build/bench/mccl-bench" "$build/tests/multiproc/mccl_check")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "device_bundle: $b is missing: build $build first" >&2; exit 1; }
  cp "$b" "$out/"
done
cp -L "$build/libmccl.so.0" "$out/"
# The libraries a plain Ubuntu or Debian install does not have.
for b in "${bins[@]}" "$build/libmccl.so.0"; do
  LD_LIBRARY_PATH="$build" ldd "$b" | awk '/=> \// {print $3}' |
    grep -E 'libcaf_|libisal|libhwy' || true
done | sort -u | while read -r lib; do cp -L "$lib" "$out/"; done
cp "$root/tools/mcclrun" "$root/tools/mccl_hosts.py" "$out/"
# The torch extension's sources, laid out as in the checkout.
rm -rf "$out/torch"
mkdir -p "$out/torch/src/python" "$out/torch/src/api/process" "$out/torch/src/include"
cp -r "$root/python/src" "$root/python/mccl" "$out/torch/src/python/"
rm -rf "$out/torch/src/python/mccl/__pycache__"
cp -r "$root/include/mccl" "$out/torch/src/include/"
cp "$root/api/process/process_runtime.hpp" "$out/torch/src/api/process/"
cp "$root/bench/build_torch_ext.py" "$out/torch/"
du -sh "$out"
