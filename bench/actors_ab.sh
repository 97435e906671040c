#!/usr/bin/env bash
# The op-actor engine against the build it replaced, side by side in one
# run: allreduce and sendrecv from 4 B to 64 MiB in x4 steps (4 B, 64 KiB,
# 1 MiB and 64 MiB among them), over TCP and shared memory, for each rank
# count given; every cell the median of ROUNDS alternated runs of both
# builds (bench/before_after.py), each size timed for about SECONDS_PER_SIZE.
#
#   bench/actors_ab.sh BEFORE_BUILD AFTER_BUILD [RANKS...]     (default ranks: 2 4)
#
# BEFORE_BUILD: a Release build of the reference commit (c9061a7), e.g.
#   git worktree add /tmp/c9061a7 c9061a7
#   cmake -S /tmp/c9061a7 -B /tmp/c9061a7/build -DCMAKE_BUILD_TYPE=Release
#   cmake --build /tmp/c9061a7/build --target mccl-bench mcclrun
# Environment: ROUNDS (default 3), SECONDS_PER_SIZE (mccl-bench -t;
# default 0.3), OUT (default out/actors_ab). Prints one markdown table per (ranks,
# transport) and writes them to $OUT/tables.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
before="${1:?usage: bench/actors_ab.sh BEFORE_BUILD AFTER_BUILD [RANKS...]}"
after="${2:?usage: bench/actors_ab.sh BEFORE_BUILD AFTER_BUILD [RANKS...]}"
shift 2
ranks=("$@")
[[ ${#ranks[@]} -gt 0 ]] || ranks=(2 4)
out="${OUT:-$here/../out/actors_ab}"
mkdir -p "$out"
: > "$out/tables.md"
for n in "${ranks[@]}"; do
  for transport in tcp shm; do
    args=(--before "$before" --after "$after" -n "$n" --ops allreduce,sendrecv
          -b 4 -e 64M -f 4 --seconds "${SECONDS_PER_SIZE:-0.3}" --rounds "${ROUNDS:-3}"
          --transport "$transport" --out "$out/n$n-$transport")
    python3 "$here/before_after.py" "${args[@]}" | tee -a "$out/tables.md"
  done
done
