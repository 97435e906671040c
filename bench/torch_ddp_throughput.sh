#!/usr/bin/env bash
# DDP training throughput, mccl against gloo: examples/ddp_dummy_train.py
# on RANKS ranks through mcclrun, the same model and global batch for both,
# the backends alternating within one run (mccl, gloo, mccl, gloo, ...) so
# drift hits both alike, plus a single-process baseline and, in each round,
# a run whose DDP exchanges nothing (--no-comm, over gloo's group: the floor
# of the step, what the computation alone costs on these cores); then
# examples/benchmark_throughput.py: the table, the ratios, OUT_DIR/ddp.npz
# and, with matplotlib, the plots OUT_DIR/ddp.png and OUT_DIR/ddp_bars.png.
#
#   bash bench/torch_ddp_throughput.sh [OUT_DIR] [ddp_dummy_train.py args...]
#
# OUT_DIR defaults to /tmp/mccl-ddp-RANKS (results are not source).
# Knobs (environment): RANKS=2, ROUNDS=3, BATCH (global batch, default one
# sample per rank), BASELINE=1 (0 skips the single-process run), FLOOR=1
# (0 skips the no-comm runs),
# PYTHON=python3, MCCLRUN=tools/mcclrun, PYTHONPATH (default build/python,
# or MCCL_BUILD_DIR/python), VARIANTS: more mccl runs in each round, after
# the plain one, with settings of their own, as space-separated
# LABEL:VAR=VALUE[,VAR=VALUE...] (e.g. "mccl-spin0:MCCL_SPIN_US=0"; their
# JSON is OUT_DIR/LABEL_N.json, their table row LABEL). The defaults of the
# training arguments: --steps 8 --warmup 3 --image 8 --threads 1 (one torch thread per rank;
# the example's default warmup: DDP rebuilds its gradient buckets in its
# second step, once per training, which the timed steps leave out); later
# arguments override them. Each run's JSON is
# OUT_DIR/{mccl,gloo,nocomm}_N.json, its output OUT_DIR/{mccl,gloo,nocomm}_N.log;
# OUT_DIR/env.txt says what ran where.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RANKS="${RANKS:-2}"
ROUNDS="${ROUNDS:-3}"
BATCH="${BATCH:-$RANKS}"
OUT="${1:-${TMPDIR:-/tmp}/mccl-ddp-$RANKS}"
shift || true
PY=${PYTHON:-python3}
MCCLRUN=${MCCLRUN:-$ROOT/tools/mcclrun}
export PYTHONPATH="${PYTHONPATH:-$ROOT/${MCCL_BUILD_DIR:-build}/python}"
# This script's, not mccl's: the ranks would refuse an MCCL_ variable they
# do not know.
unset MCCL_BUILD_DIR
TRAIN=("$ROOT/examples/ddp_dummy_train.py" --steps 8 --warmup 3 --image 8 --threads 1
       --batch "$BATCH" "$@")
mkdir -p "$OUT"
rm -f "$OUT"/*_*.json "$OUT"/baseline.json

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -n), $(nproc) CPUs, $(uname -sr)"
  grep -m1 'model name' /proc/cpuinfo || true
  echo "python: $("$PY" -c 'import sys; print(sys.version.split()[0], sys.executable)')"
  echo "torch: $("$PY" -c 'import torch; print(torch.__version__)')"
  echo "mccl package: $("$PY" -c 'import mccl; print(mccl.__file__, "backend:", mccl.TORCH_BACKEND)')"
  echo "ranks: $RANKS, rounds: $ROUNDS, command: ${TRAIN[*]}"
} > "$OUT/env.txt"
cat "$OUT/env.txt"

baseline=()
if [[ "${BASELINE:-1}" != 0 ]]; then
  "$PY" "${TRAIN[@]}" --baseline --save-stats "$OUT/baseline.json" | tee "$OUT/baseline.log"
  baseline=(--baseline "$OUT/baseline.json")
fi
declare -A variant_env=()
runs=(mccl)
for v in ${VARIANTS:-}; do
  label=${v%%:*}
  [[ $label != "$v" && $label =~ ^[A-Za-z0-9_.-]+$ ]] ||
    { echo "VARIANTS: expected LABEL:VAR=VALUE[,VAR=VALUE...], got '$v'" >&2; exit 2; }
  case $label in
    mccl|gloo|nocomm|baseline)
      echo "VARIANTS: label '$label' is a run of its own; name the variant otherwise" >&2; exit 2 ;;
  esac
  [[ -z ${variant_env[$label]:-} ]] || { echo "VARIANTS: label '$label' given twice" >&2; exit 2; }
  variant_env[$label]=${v#*:}
  runs+=("$label")
done
runs+=(gloo)
[[ "${FLOOR:-1}" != 0 ]] && runs+=(nocomm)
stats=()
for round in $(seq "$ROUNDS"); do
  for run in "${runs[@]}"; do
    args=(--backend "$run")
    envs=()
    [[ $run == nocomm ]] && args=(--backend gloo --no-comm)
    if [[ -n ${variant_env[$run]:-} ]]; then
      args=(--backend mccl --label "$run")
      IFS=, read -r -a envs <<< "${variant_env[$run]}"
    fi
    env "${envs[@]}" "$PY" "$MCCLRUN" -n "$RANKS" --timeout 900 -- "$PY" "${TRAIN[@]}" "${args[@]}" \
      --save-stats "$OUT/${run}_${round}.json" > "$OUT/${run}_${round}.log" 2>&1 ||
      { echo "$run round $round failed:"; tail -n 30 "$OUT/${run}_${round}.log"; exit 1; }
    grep -h "samples/s" "$OUT/${run}_${round}.log"
  done
done
for run in "${runs[@]}"; do
  stats+=("$OUT/${run}"_*.json)
done
"$PY" "$ROOT/examples/benchmark_throughput.py" "${baseline[@]}" --ddp "${stats[@]}" \
  -o "$OUT/ddp" | tee "$OUT/table.md"
