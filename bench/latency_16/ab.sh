#!/usr/bin/env bash
# The 16-rank 4 B allreduce over TCP before and after this change set
# (reading the awaited links, compiled step plans shared between ops,
# MCCL_SPIN_US=auto), with Open MPI tcp in the same call: two bundles made by
# bench/device_bundle.sh, on the 16-core machine, in one call:
#   BEFORE=out/p0 AFTER=out/final bash bench/latency_16/ab.sh
# Prints p50 (µs): 16 ranks TCP, ROUNDS (default 7) rounds with the order
# rotated, Open MPI tcp in each; 8 ranks TCP and 16 ranks shared memory (the
# host board), 3 rounds; 16-rank large allreduces over TCP (busbw GB/s), 2
# rounds, to check that bandwidth did not suffer; the kernel's floor for the
# same pattern (rd_floor.cpp). Figures of the last run: docs/performance.md.
set -u
BEFORE=${BEFORE:-out/p0}
AFTER=${AFTER:-out/final}
ROUNDS=${ROUNDS:-7}
MPIB=/tmp/mpi-bench
mpicxx -O3 -DNDEBUG -std=c++17 -DOMPI_SKIP_MPICXX=1 -o $MPIB bench/mpi_bench.cpp || MPIB=""
g++ -O2 -o /tmp/rd_floor bench/latency_16/rd_floor.cpp
mccl() { # bundle ranks transport args...: "size p50 p99 busbw check algorithm" per row
  local b=$1 n=$2 t=$3; shift 3
  LD_LIBRARY_PATH=$PWD/$b MCCL_TRANSPORT=$t timeout 120 python3 tools/mcclrun -n "$n" --timeout 110 -- \
    "$b/mccl-bench" "$@" 2>&1 | grep -E "^\[0\] +[0-9]" | awk '{print $2, $4, $5, $7, $8, $9}'
}
mpi() { # ranks args...
  [ -n "$MPIB" ] || { echo "no mpi-bench"; return; }
  local n=$1; shift
  MPI_BENCH=$MPIB MPI_BENCH_TIMEOUT=120 bash bench/run_mpi_bench.sh "$n" tcp "$@" 2>&1 |
    grep -E "^ +[0-9]" | awk '{print $1, $3}'
}
lat=(-b 4 -e 4 -n 3000 -w 300)
for r in $(seq "$ROUNDS"); do
  order=(before after mpi)
  for k in 0 1 2; do
    case ${order[$(( (k + r) % 3 ))]} in
      before) echo "16 tcp round $r before $(mccl "$BEFORE" 16 tcp "${lat[@]}")" ;;
      after) echo "16 tcp round $r after $(mccl "$AFTER" 16 tcp "${lat[@]}")" ;;
      mpi) echo "16 tcp round $r mpi_tcp $(mpi 16 "${lat[@]}")" ;;
    esac
  done
done
for r in 1 2 3; do
  for b in "$BEFORE" "$AFTER"; do
    echo "8 tcp round $r $b $(mccl "$b" 8 tcp "${lat[@]}")"
    echo "16 shm round $r $b $(mccl "$b" 16 auto "${lat[@]}")"
  done
done
for r in 1 2; do
  for b in "$BEFORE" "$AFTER"; do
    echo "16 tcp large round $r $b"; mccl "$b" 16 tcp -b 1M -e 64M -f 8 -n 8 -w 2
  done
done
for r in 1 2 3; do /tmp/rd_floor 16 5000; done
