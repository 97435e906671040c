#!/usr/bin/env bash
# Large allreduces over TCP on one host: Rabenseifner, the ring and the
# bidirectional ring at 8 and 16 ranks, 1-64 MiB, three rounds with the
# order rotated (bench/RESULTS.md, "Large allreduces over TCP on 16 cores").
# On the 16-core machine, with a bundle made by tools/device_bundle.sh:
#   BUNDLE=out/knomial bash bench/algos_16/algos_tcp.sh
set -u
BUNDLE=${BUNDLE:-out/knomial}
one() { # ranks algorithm
  echo "== n$1 $2"
  LD_LIBRARY_PATH=$PWD/$BUNDLE MCCL_TRANSPORT=tcp MCCL_ALGO="allreduce=$2" timeout 120 \
    python3 tools/mcclrun -n "$1" --timeout 110 -- "$BUNDLE/mccl-bench" -b 1M -e 64M -f 4 \
    -n 10 -w 2 2>&1 | grep -E "\[0\] +[0-9]+ " | awk '{print $2, $4, $7, $8, $9}'
}
cells=("16 rabenseifner" "16 ring" "16 bidir_ring" "8 rabenseifner" "8 ring" "8 bidir_ring")
for round in 1 2 3; do
  echo "### round $round"
  for i in "${!cells[@]}"; do
    one ${cells[$(( (i + 2 * round) % ${#cells[@]} ))]}
  done
done
