#!/usr/bin/env bash
# Large allreduces over loopback TCP on the 16-core machine: mccl (one
# bundle made by bench/device_bundle.sh), Open MPI tcp, and a plain ring on
# bare sockets (tcp_ring.cpp, one thread per rank, no library), at 2, 4, 8
# and 16 ranks from 1 to 64 MiB, ROUNDS (default 2) rounds with the order
# rotated; then the machine's memory bandwidth with 1 and 16 copying
# processes (bench/memory_bandwidth.cpp). In one call:
#   BUNDLE=out/final bash bench/busbw_16/floor.sh
# Figures of the last run: docs/performance.md; the raw output's rows are
# "ranks impl round size busbw(GB/s)".
set -u
BUNDLE=${BUNDLE:-out/final}
ROUNDS=${ROUNDS:-2}
MPIB=/tmp/mpi-bench
mpicxx -O3 -DNDEBUG -std=c++17 -DOMPI_SKIP_MPICXX=1 -o $MPIB bench/mpi_bench.cpp || MPIB=""
g++ -O2 -o /tmp/tcp_ring bench/busbw_16/tcp_ring.cpp -pthread
g++ -O2 -o /tmp/memory_bandwidth bench/memory_bandwidth.cpp
sizes=(-b 1M -e 64M -f 4 -n 10 -w 2)
mccl() { # ranks round
  LD_LIBRARY_PATH=$PWD/$BUNDLE MCCL_TRANSPORT=tcp timeout 150 python3 tools/mcclrun -n "$1" --timeout 140 -- \
    "$BUNDLE/mccl-bench" "${sizes[@]}" 2>&1 | grep -E "^\[0\] +[0-9]" | awk -v p="$1 mccl_tcp $2" '{print p, $2, $7, $8}'
}
mpi() { # ranks round
  [ -n "$MPIB" ] || { echo "$1 mpi_tcp $2 no mpi-bench"; return; }
  MPI_BENCH=$MPIB MPI_BENCH_TIMEOUT=150 bash bench/run_mpi_bench.sh "$1" tcp "${sizes[@]}" 2>&1 |
    grep -E "^ +[0-9]" | awk -v p="$1 mpi_tcp $2" '{print p, $1, $6, $7}'
}
ring() { # ranks round
  for mib in 1 4 16 64; do
    timeout 150 /tmp/tcp_ring "$1" "$mib" | awk -v p="$1 tcp_ring $2" -v s="${mib}M" '{print p, s, $10, $13}'
  done
}
for r in $(seq "$ROUNDS"); do
  for n in 2 4 8 16; do
    order=(mccl mpi ring)
    for k in 0 1 2; do "${order[$(( (k + r + n) % 3 ))]}" "$n" "$r"; done
  done
done
for p in 1 16; do /tmp/memory_bandwidth "$p"; done
nproc; lscpu | grep -E "Model name|MHz|L2|L3" | head -5
