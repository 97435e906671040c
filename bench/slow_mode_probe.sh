#!/usr/bin/env bash
# What a many-core VM does to processes that spin (docs/performance.md,
# "The slow mode at 64 ranks"): bench/peer_bandwidth.cpp at several process
# counts and ways of waiting, each run with the share of the machine's CPU
# time that was idle and that the hypervisor stole (/proc/stat) while it
# ran; then, if BENCH_BIN is set, 4 B allreduces of mccl at RANKS ranks
# with the same two shares, so that a run in the slow mode can be told
# from one that is not by more than its latency.
#
#   bash bench/slow_mode_probe.sh [PEER_BANDWIDTH_BINARY]   # default: compiled into /tmp
#
# Settings (environment): PROCS ("32 48 64"; counts above the machine's
# CPUs are skipped), WAYS ("plain pause yield bind": PEER_SPIN=plain,
# pause, yield, and plain with PEER_BIND=1), BYTES (1048576), BENCH_BIN
# (a mccl-bench binary; unset: no mccl runs), MCCLRUN (tools/mcclrun),
# MPI_BENCH (an mpi-bench binary: Open MPI's runs alternate with mccl's;
# bench/run_mpi_bench.sh), RANKS (64), RUNS (4).
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${1:-/tmp/peer_bandwidth}
if [ ! -x "$bin" ]; then
  g++ -O2 -o "$bin" bench/peer_bandwidth.cpp
fi
cpus=$(nproc)
# The machine's CPU time so far, in clock ticks: "total idle steal".
cpu_ticks() {
  awk '/^cpu /{ total = 0; for (i = 2; i <= NF; ++i) total += $i; print total, $5 + $6, $9 }' /proc/stat
}
# Runs its arguments; prints their output, then the idle and stolen shares.
with_shares() {
  local before after
  before=$(cpu_ticks)
  "$@"
  after=$(cpu_ticks)
  echo "$before $after" | awk '{ t = $4 - $1; printf "  idle %.1f %%, stolen %.1f %% of %d CPUs\n", 100 * ($5 - $2) / t, 100 * ($6 - $3) / t, '"$cpus"' }'
}
echo "$(nproc) CPUs; $(lscpu | grep -E '^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|Hypervisor vendor)' | tr -s ' ' | paste -sd ';')"
for n in ${PROCS:-32 48 64}; do
  [ "$n" -le "$cpus" ] || continue
  for way in ${WAYS:-plain pause yield bind}; do
    echo "$n processes, $way:"
    case $way in
      bind) with_shares env PEER_BIND=1 PEER_SPIN=plain "$bin" "$n" "${BYTES:-1048576}" ;;
      *) with_shares env PEER_SPIN="$way" "$bin" "$n" "${BYTES:-1048576}" ;;
    esac
  done
done
# One mccl run (or Open MPI's, over shared memory): its result line only.
mccl_allreduce() {
  timeout 300 python3 "${MCCLRUN:-tools/mcclrun}" -n "$1" -- "$BENCH_BIN" -b 4 -e 4 -n 3000 -w 50 --no-check |
    grep -E '^(\[0\] )? +4 ' || echo "  (no result line: the run failed or timed out)"
}
mpi_allreduce() {
  MPI_BENCH_TIMEOUT=300 bash bench/run_mpi_bench.sh "$1" sm -b 4 -e 4 -n 3000 -w 50 |
    grep -E '^ +4 ' || echo "  (no result line: the run failed or timed out)"
}
if [ -n "${BENCH_BIN:-}${MPI_BENCH:-}" ]; then
  for run in $(seq "${RUNS:-4}"); do
    if [ -n "${BENCH_BIN:-}" ]; then
      echo "mccl, ${RANKS:-64} ranks, 4 B allreduce, run $run:"
      with_shares mccl_allreduce "${RANKS:-64}"
    fi
    if [ -n "${MPI_BENCH:-}" ]; then
      echo "Open MPI sm, ${RANKS:-64} ranks, 4 B allreduce, run $run:"
      with_shares mpi_allreduce "${RANKS:-64}"
    fi
  done
fi
