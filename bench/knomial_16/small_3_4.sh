#!/bin/bash
# Ran at commit 1369e54 with B=out/knomial (tools/device_bundle.sh); output:
# small_3_4.txt. bench/RESULTS.md, "Small allreduces on 16 cores".
# 3 and 4 ranks, oneshot vs rd, tcp and shm, 4 B .. 64 KiB, 3 rounds rotated.
B=out/knomial
one() { # n transport algo
  echo "== n$1 $2 $3"
  LD_LIBRARY_PATH=$PWD/$B MCCL_TRANSPORT=$2 MCCL_ALGO="allreduce=$3" timeout 60 python3 tools/mcclrun -n $1 --timeout 50 -- $B/mccl-bench -b 4 -e 64K -f 4 -n 2000 -w 200 2>&1 | grep -E "\[0\] +[0-9]+ " | awk '{print $2, $4, $8, $9}'
}
cells=("4 tcp oneshot" "4 tcp rd" "4 auto oneshot" "4 auto rd" "3 tcp oneshot" "3 tcp rd" "3 auto oneshot" "3 auto rd")
for r in 1 2 3; do
  echo "### round $r"
  for i in "${!cells[@]}"; do one ${cells[$(( (i + 3 * r) % ${#cells[@]} ))]}; done
done
