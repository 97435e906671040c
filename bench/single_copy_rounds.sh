#!/usr/bin/env bash
# Single copy between ranks of one host, on and off, beside Open MPI sm: at
# 16, 8, 4 and 2 ranks, allreduce, allgather and broadcast from 1 to 64 MiB,
# 3 rounds with the variants alternating. Each run's table goes to
# $OUT/rROUND_nRANKS_OP_VARIANT.txt (VARIANT 0 = rings, 64K = single copy
# from 64 KiB, mpi = Open MPI sm); bench/single_copy_table.py makes the
# medians table. For the 16-core machine: pack the binaries with
# bench/device_bundle.sh build out/cma and carry out/cma.
set -u
BUNDLE=${BUNDLE:-out/cma}
B=$PWD/$BUNDLE
OUT=${OUT:-/tmp/single_copy}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
mpicxx -O3 -DNDEBUG -std=c++17 -DOMPI_SKIP_MPICXX=1 -o /tmp/mpi-bench bench/mpi_bench.cpp > "$OUT/mpicxx.txt" 2>&1
for round in 1 2 3; do
  for n in 16 8 4 2; do
    for op in allreduce allgather broadcast; do
      for v in 0 64K mpi; do
        [ "$(el)" -gt 520 ] && { echo "stop at $(el)s (time budget)"; exit 0; }
        f=$OUT/r${round}_n${n}_${op}_${v}.txt
        if [ $v = mpi ]; then
          MPI_BENCH=/tmp/mpi-bench MPI_BENCH_TIMEOUT=60 bash bench/run_mpi_bench.sh $n sm -o $op -b 1M -e 64M -f 4 -n 10 > "$f" 2>&1
        else
          MCCL_SHM_SINGLE_COPY_BYTES=$v timeout 90 python3 tools/mcclrun -n $n --timeout 80 -- "$B/mccl-bench" -o $op -b 1M -e 64M -f 4 -n 10 > "$f" 2>&1
        fi
        echo "r$round n$n $op $v rc=$? t=$(el)"
      done
    done
  done
done
