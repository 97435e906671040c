#!/usr/bin/env bash
# One host, 8 and 16 ranks, TCP and shared memory, allgather and allreduce busbw
# at 1, 4, 16, 64 MiB: two bundles (tools/device_bundle.sh) alternating, two rounds
# (bench/RESULTS.md, "Simulated worlds": the program::rounds A/B).
one() { # bundle transport ranks op
  LD_LIBRARY_PATH=$PWD/$1 MCCL_TRANSPORT=$2 timeout 100 python3 tools/mcclrun -n $3 --timeout 90 -- $1/mccl-bench -o $4 -b 1M -e 64M -f 4 -n 10 -w 2 2>&1 \
    | grep -E "\[0\] +[0-9]+ " | awk '{printf "%s ", $7}'
}
for r in 1 2; do
  for t in tcp auto; do
    for n in 8 16; do
      for op in allgather allreduce; do
        echo "r$r $t n$n $op before: $(one out/lat16b $t $n $op)| after: $(one out/rounds $t $n $op)"
      done
    done
  done
done
