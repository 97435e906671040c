#!/usr/bin/env bash
# One measurement set of the 16-rank 4 B allreduce over TCP on the 16-core
# machine: each bundle of BUNDLES (made by bench/device_bundle.sh) and Open
# MPI tcp, ROUNDS (default 5) rounds with the order rotated, 3000
# iterations each (p50 µs, per iteration the slowest rank). In one call:
#   BUNDLES="out/final out/head" bash bench/latency_16/lat_set.sh
# Rows: "round system p50".
set -u
read -r -a bundles <<< "${BUNDLES:-out/head}"
ROUNDS=${ROUNDS:-5}
MPIB=/tmp/mpi-bench
mpicxx -O3 -DNDEBUG -std=c++17 -DOMPI_SKIP_MPICXX=1 -o $MPIB bench/mpi_bench.cpp || MPIB=""
lat=(-b 4 -e 4 -n 3000 -w 300)
run() { # system: a bundle or "mpi_tcp"
  if [ "$1" = mpi_tcp ]; then
    [ -n "$MPIB" ] || { echo "no mpi-bench"; return; }
    MPI_BENCH=$MPIB MPI_BENCH_TIMEOUT=120 bash bench/run_mpi_bench.sh 16 tcp "${lat[@]}" 2>&1 |
      grep -E "^ +[0-9]" | awk '{print $3}'
  else
    LD_LIBRARY_PATH=$PWD/$1 MCCL_TRANSPORT=tcp timeout 120 python3 tools/mcclrun -n 16 --timeout 110 -- \
      "$1/mccl-bench" "${lat[@]}" 2>&1 | grep -E "^\[0\] +[0-9]" | awk '{print $4, $8}'
  fi
}
systems=("${bundles[@]}" mpi_tcp)
n=${#systems[@]}
for r in $(seq "$ROUNDS"); do
  for k in $(seq 0 $((n - 1))); do
    s=${systems[$(( (k + r) % n ))]}
    echo "$r $s $(run "$s")"
  done
done
