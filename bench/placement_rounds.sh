#!/usr/bin/env bash
# Rounds of mccl at many ranks on one host under two placements, beside
# Open MPI's shared memory, for the slow mode of many ranks
# (docs/performance.md, "The slow mode at 64 ranks"): each round runs
# every op with mcclrun's default placement, then left to the kernel
# (--bind-to none) polling MCCL_SPIN_US=10000, then Open MPI sm
# (bench/run_mpi_bench.sh), and prints the p50 lines of each.
#
#   BUNDLE=out/live bash bench/placement_rounds.sh      # a folder bench/device_bundle.sh made
#
# Settings (environment): BUNDLE (unset: BUILD_DIR's bench/mccl-bench,
# default build, and tools/mcclrun), RANKS (64), ROUNDS (3), OPS ("allreduce
# broadcast"), SZ ("-b 4 -e 1M -f 16 -n 200 -w 20"), MPI_BENCH (compiled
# with mpicxx into /tmp when mpicxx is there; no Open MPI runs without it).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ranks=${RANKS:-64}
if [ -n "${BUNDLE:-}" ]; then
  bench=$BUNDLE/mccl-bench mcclrun=$BUNDLE/mcclrun
  export LD_LIBRARY_PATH=$BUNDLE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
  bench=${BUILD_DIR:-build}/bench/mccl-bench mcclrun=tools/mcclrun
fi
mpi=${MPI_BENCH:-/tmp/mpi-bench}
if [ ! -x "$mpi" ] && command -v mpicxx > /dev/null 2>&1; then
  mpicxx -O3 -DNDEBUG -std=c++17 -DOMPI_SKIP_MPICXX=1 -o "$mpi" bench/mpi_bench.cpp || exit 1
fi
# One mccl run: its p50 lines (rank 0's).
mccl_run() { # label op [mcclrun options] -- env...
  local label=$1 op=$2 opts=()
  shift 2
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  echo "== $label $op"
  env "$@" timeout 300 python3 "$mcclrun" "${opts[@]}" -n "$ranks" -- "$bench" -o "$op" ${SZ:--b 4 -e 1M -f 16 -n 200 -w 20} \
    --no-check 2>&1 | grep -E '^\[0\] +[0-9]+ ' || echo "(no result: the run failed or timed out)"
}
for round in $(seq "${ROUNDS:-3}"); do
  for op in ${OPS:-allreduce broadcast}; do
    mccl_run "default r$round" "$op" -- MCCL_TRANSPORT=auto
    mccl_run "unbound10k r$round" "$op" --bind-to none -- MCCL_TRANSPORT=auto MCCL_SPIN_US=10000
    if [ -x "$mpi" ]; then
      echo "== mpi r$round $op"
      MPI_BENCH=$mpi MPI_BENCH_TIMEOUT=300 bash bench/run_mpi_bench.sh "$ranks" sm -o "$op" \
        ${SZ:--b 4 -e 1M -f 16 -n 200 -w 20} 2>&1 | grep -E '^ +[0-9]+ ' || echo "(no result)"
    fi
  done
done
