#!/usr/bin/env bash
# Reading the awaited link (engine::channels_to_visit, algorithm::next_senders)
# against one poll over every socket per pass: two bundles made by
# tools/device_bundle.sh, on the 16-core machine, in one call:
#   BEFORE=out/p0 AFTER=out/aw bash bench/latency_16/awaited_ab.sh
# Prints p50 (µs) of the 16-rank 4 B TCP allreduce for before, after and
# Open MPI tcp (mpi-bench built with mpicxx), 5 rounds with the order
# rotated; then 8 ranks; then 16-rank large allreduces (busbw GB/s), to check
# that bandwidth did not suffer; then the kernel's floor for the same
# pattern (rd_floor.cpp: raw sockets, no library). Output: awaited_ab.txt.
set -u
BEFORE=${BEFORE:-out/p0}
AFTER=${AFTER:-out/aw}
MPIB=/tmp/mpi-bench
mpicxx -O3 -DNDEBUG -std=c++17 -DOMPI_SKIP_MPICXX=1 -o $MPIB bench/mpi_bench.cpp || MPIB=""
g++ -O2 -o /tmp/rd_floor bench/latency_16/rd_floor.cpp
mccl() { # bundle ranks args...: "size p50 busbw check algorithm" per row
  local b=$1 n=$2; shift 2
  LD_LIBRARY_PATH=$PWD/$b MCCL_TRANSPORT=tcp timeout 120 python3 tools/mcclrun -n "$n" --timeout 110 -- \
    "$b/mccl-bench" "$@" 2>&1 | grep -E "^\[0\] +[0-9]" | awk '{print $2, $4, $7, $8, $9}'
}
mpi() { # ranks args...
  [ -n "$MPIB" ] || { echo "no mpi-bench"; return; }
  local n=$1; shift
  MPI_BENCH=$MPIB MPI_BENCH_TIMEOUT=120 bash bench/run_mpi_bench.sh "$n" tcp "$@" 2>&1 |
    grep -E "^ +[0-9]" | awk '{print $1, $3}'
}
lat=(-b 4 -e 4 -n 3000 -w 300)
for r in 1 2 3 4 5; do
  order=(before after mpi)
  for k in 0 1 2; do
    v=${order[$(( (k + r) % 3 ))]}
    case $v in
      before) echo "16 round $r before $(mccl "$BEFORE" 16 "${lat[@]}")" ;;
      after) echo "16 round $r after $(mccl "$AFTER" 16 "${lat[@]}")" ;;
      mpi) echo "16 round $r mpi_tcp $(mpi 16 "${lat[@]}")" ;;
    esac
  done
done
for r in 1 2 3; do
  echo "8 round $r before $(mccl "$BEFORE" 8 "${lat[@]}")"
  echo "8 round $r after $(mccl "$AFTER" 8 "${lat[@]}")"
done
for r in 1 2; do
  for b in "$BEFORE" "$AFTER"; do
    echo "16 large $r $b"; mccl "$b" 16 -b 1M -e 64M -f 8 -n 8 -w 2
  done
done
for r in 1 2 3; do /tmp/rd_floor 16 5000; done
