#!/bin/bash
# Ran at commit 1369e54 with B=out/knomial (tools/device_bundle.sh); output:
# latency_variants.txt. bench/RESULTS.md, "Small allreduces on 16 cores".
# 16-rank 4 B TCP allreduce (rd), variants rotated, 3 rounds.
B=out/knomial
one() { # name env... -- wrapper
  local name=$1; shift
  local wrap=""
  if [ "$1" = "PIN" ]; then wrap="$PWD/bench/knomial_16/pin.sh"; shift; fi
  local v
  v=$(env LD_LIBRARY_PATH=$PWD/$B MCCL_TRANSPORT=tcp "$@" timeout 60 python3 tools/mcclrun -n 16 --timeout 50 -- $wrap $B/mccl-bench -b 4 -e 4 -n 3000 -w 300 2>&1 | grep -E "\[0\] +4 " | awk '{print $4}')
  echo "$name $v"
}
variants=(base pin hb fr w1 pin_w1 spin0)
for r in 1 2 3; do
  for i in "${!variants[@]}"; do
    v=${variants[$(( (i + r) % ${#variants[@]} ))]}
    case $v in
      base) one base X=1 ;;
      pin) one pin PIN X=1 ;;
      hb) one hb MCCL_HEARTBEAT_MS=10000 ;;
      fr) one fr MCCL_FLIGHT_RECORDER=0 ;;
      w1) one w1 MCCL_WORKER_THREADS=1 ;;
      pin_w1) one pin_w1 PIN MCCL_WORKER_THREADS=1 ;;
      spin0) one spin2000 MCCL_SPIN_US=2000 ;;
    esac
  done
done
