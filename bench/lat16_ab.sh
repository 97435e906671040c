#!/usr/bin/env bash
# 16-rank 4 B allreduce over TCP, two builds alternating, 4 rounds (p50 µs):
# bench/RESULTS.md, "16 ranks over TCP: one poll instead of fifteen reads".
# On the 16-core machine, with two bundles made by tools/device_bundle.sh:
#   BEFORE=out/lat16 AFTER=out/lat16b bash bench/lat16_ab.sh
set -u
BEFORE=${BEFORE:-out/lat16}
AFTER=${AFTER:-out/lat16b}
one() { # bundle env-assignment
  LD_LIBRARY_PATH=$PWD/$1 env "$2" MCCL_TRANSPORT=tcp timeout 60 python3 tools/mcclrun -n 16 --timeout 50 -- \
    "$1/mccl-bench" -b 4 -e 4 -n 3000 -w 300 2>&1 | grep -E "\[0\] +4 " | awk '{print $4}'
}
for i in 1 2 3 4; do
  echo "round $i before $(one "$BEFORE" X=1) after $(one "$AFTER" X=1)" \
       "after_w1 $(one "$AFTER" MCCL_WORKER_THREADS=1) before_w1 $(one "$BEFORE" MCCL_WORKER_THREADS=1)"
done
