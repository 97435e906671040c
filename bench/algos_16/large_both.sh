#!/usr/bin/env bash
# 64 MiB (and 16 MiB) allreduce at 8 and 16 ranks, Rabenseifner against the
# ring and the bidirectional ring, over TCP and shared memory, five rounds
# rotated (docs/performance.md, "Large allreduces on 16 cores").
#   BUNDLE=out/knomial bash bench/algos_16/large_both.sh
set -u
BUNDLE=${BUNDLE:-out/knomial}
one() { # ranks transport algorithm
  echo "== n$1 $2 $3"
  LD_LIBRARY_PATH=$PWD/$BUNDLE MCCL_TRANSPORT=$2 MCCL_ALGO="allreduce=$3" timeout 120 \
    python3 tools/mcclrun -n "$1" --timeout 110 -- "$BUNDLE/mccl-bench" -b 16M -e 64M -f 4 \
    -n 8 -w 2 2>&1 | grep -E "\[0\] +[0-9]+ " | awk '{print $2, $4, $7, $8, $9}'
}
cells=()
for n in 16 8; do for t in tcp auto; do for a in rabenseifner ring bidir_ring; do cells+=("$n $t $a"); done; done; done
for round in 1 2 3 4 5; do
  echo "### round $round"
  for i in "${!cells[@]}"; do
    one ${cells[$(( (i + 5 * round) % ${#cells[@]} ))]}
  done
done
