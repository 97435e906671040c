#!/usr/bin/env bash
# DDP training throughput, mccl vs gloo, 2 ranks, same model and global
# batch, backends alternating within one run so drift hits both alike.
#   bash bench/torch_ddp_throughput.sh [ROUNDS] [extra ddp_dummy_train.py args...]
# Writes bench/torch_ddp/{baseline,mccl_N,gloo_N}.json and, through
# examples/benchmark_throughput.py, bench/torch_ddp/ddp_2ranks.{npz,_*.png}.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"; shift || true
OUT="$ROOT/bench/torch_ddp"
PY=${PYTHON:-python3}
TRAIN=("$ROOT/examples/ddp_dummy_train.py" --steps 5 --warmup 1 --batch 2 --image 8 --threads 1 "$@")
export PYTHONPATH="$ROOT/${MCCL_BUILD_DIR:-build}/python"
mkdir -p "$OUT"
"$PY" "${TRAIN[@]}" --baseline --save-stats "$OUT/baseline.json"
for round in $(seq "$ROUNDS"); do
  for backend in mccl gloo; do
    "$PY" "$ROOT/tools/mcclrun" -n 2 --timeout 600 -- "$PY" "${TRAIN[@]}" --backend "$backend" \
      --save-stats "$OUT/${backend}_${round}.json"
  done
done
"$PY" "$ROOT/examples/benchmark_throughput.py" --baseline "$OUT/baseline.json" \
  --ddp "$OUT"/mccl_*.json "$OUT"/gloo_*.json -o "$OUT/ddp_2ranks"
