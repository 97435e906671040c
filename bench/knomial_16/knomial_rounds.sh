#!/usr/bin/env bash
# Ran at commit 1369e54 (out/knomial = tools/device_bundle.sh build out/knomial);
# the knomial algorithm was removed after this measurement (bench/RESULTS.md).
# Small allreduces over TCP on one host: recursive doubling, the k-nomial
# exchange and the one-shot exchange at 4, 8 and 16 ranks, 4 B to 64 KiB,
# three rounds with the order rotated, plus Open MPI tcp at 16 ranks in
# every round (bench/RESULTS.md, "Small allreduces on 16 cores: k-nomial").
# On the 16-core machine, with a bundle made by tools/device_bundle.sh:
#   BUNDLE=out/knomial bash bench/knomial_rounds.sh
set -u
BUNDLE=${BUNDLE:-out/knomial}
ITERS=${ITERS:-2000}
one() { # ranks algorithm
  echo "== n$1 $2"
  LD_LIBRARY_PATH=$PWD/$BUNDLE MCCL_TRANSPORT=tcp MCCL_ALGO="allreduce=$2" timeout 100 \
    python3 tools/mcclrun -n "$1" --timeout 90 -- "$BUNDLE/mccl-bench" -b 4 -e 64K -f 4 \
    -n "$ITERS" -w 200 2>&1 | grep -E "\[0\] +[0-9]+ " | awk '{print $2, $4, $8, $9}'
}
mpi() {
  echo "== n16 openmpi-tcp"
  MPI_BENCH=/tmp/mpi-bench MPI_BENCH_TIMEOUT=100 bash bench/run_mpi_bench.sh 16 tcp -b 4 -e 64K -f 4 \
    -n "$ITERS" -w 200 2>&1 | grep -E "^ +[0-9]+ " | awk '{print $1, $3, $7, $8}'
}
mpicxx -O3 -DNDEBUG -std=c++17 -DOMPI_SKIP_MPICXX=1 -o /tmp/mpi-bench bench/mpi_bench.cpp
cells=("16 rd" "16 knomial" "16 oneshot" "mpi" "8 rd" "8 knomial" "4 oneshot" "4 knomial" "4 rd")
for round in 1 2 3; do
  echo "### round $round"
  shift_by=$(( (round - 1) * 3 ))
  for i in "${!cells[@]}"; do
    cell=${cells[$(( (i + shift_by) % ${#cells[@]} ))]}
    if [ "$cell" = mpi ]; then mpi; else one $cell; fi
  done
done
