#!/bin/bash
# Copies what mccl's benchmarks need to run on a machine without Debian's
# packages into one folder: mccl-bench, mccl_check, libmccl.so.0 and the
# libraries ldd lists that a stock distribution lacks (CAF, ISA-L, Highway).
# Run the binaries there with LD_LIBRARY_PATH set to the folder (their
# RUNPATH points at this build tree). tools/mcclrun travels with the
# checkout.
#
#   bench/device_bundle.sh [BUILD_DIR] [OUT_DIR]    (defaults: build out/device)
set -euo pipefail
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
du -sh "$out"
