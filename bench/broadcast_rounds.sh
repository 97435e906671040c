#!/usr/bin/env bash
# Broadcast at 16 and 8 ranks on one host: mccl's tree, chain and scatter_allgather
# (mccl-bench -a) beside Open MPI sm, 64 KiB to 64 MiB, 3 rounds alternating; each
# table goes to $OUT/bROUND_nRANKS_ALGO.txt. Bundle: bench/device_bundle.sh build out/cma.
OUT=${OUT:-/tmp/broadcast}; mkdir -p "$OUT"
set -u
BUNDLE=${BUNDLE:-out/cma}
B=$PWD/$BUNDLE
export LD_LIBRARY_PATH=$B
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
mpicxx -O3 -DNDEBUG -std=c++17 -DOMPI_SKIP_MPICXX=1 -o /tmp/mpi-bench bench/mpi_bench.cpp > "$OUT/mpicxx.txt" 2>&1
for round in 1 2 3; do
  for n in 16 8; do
    for a in tree chain scatter_allgather mpi; do
      [ "$(el)" -gt 500 ] && { echo "stop at $(el)s"; exit 0; }
      f=$OUT/b${round}_n${n}_${a}.txt
      if [ $a = mpi ]; then
        MPI_BENCH=/tmp/mpi-bench MPI_BENCH_TIMEOUT=60 bash bench/run_mpi_bench.sh $n sm -o broadcast -b 64K -e 64M -f 4 -n 10 > $f 2>&1
      else
        timeout 90 python3 tools/mcclrun -n $n --timeout 80 -- $B/mccl-bench -o broadcast -a $a -b 64K -e 64M -f 4 -n 10 > $f 2>&1
      fi
      echo "r$round n$n $a rc=$? t=$(el)"
    done
  done
done
