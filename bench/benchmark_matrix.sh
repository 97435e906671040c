#!/usr/bin/env bash
# A matrix of allreduce benchmarks on this machine: sizes x rank counts x
# transports x compression, with mccl-bench through mcclrun, into one table
# and one plot.
#
#   bash bench/benchmark_matrix.sh [OUT_DIR]
#
# Knobs (environment): RANKS="2 4", TRANSPORTS="shm tcp",
# COMPRESSIONS="none fp16 bf16 topk", MIN=64K, MAX=16M, OP=allreduce,
# BENCH=build/bench/mccl-bench (a Release build: tools/dev.sh build).
# Writes OUT_DIR/matrix.jsonl (one mccl-bench JSON line per cell and size),
# OUT_DIR/matrix.md (median of the cell's iterations: algbw, busbw, p50, the
# algorithm) and, with matplotlib, OUT_DIR/matrix.png (algbw against size,
# one line per ranks/transport/compression). topk results differ from the
# exact sum by design, so its cells are not checked; every other cell is
# checked element by element and a wrong one fails the script.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Outside the checkout by default: results are not source.
OUT="${1:-${TMPDIR:-/tmp}/mccl-benchmark-matrix}"
BENCH="${BENCH:-$ROOT/build/bench/mccl-bench}"
RANKS="${RANKS:-2 4}"
TRANSPORTS="${TRANSPORTS:-shm tcp}"
COMPRESSIONS="${COMPRESSIONS:-none fp16 bf16 topk}"
MIN="${MIN:-64K}"
MAX="${MAX:-16M}"
OP="${OP:-allreduce}"

[[ -x "$BENCH" ]] || { echo "benchmark_matrix: $BENCH not built (bash tools/dev.sh build)" >&2; exit 1; }
mkdir -p "$OUT"
: > "$OUT/matrix.jsonl"
for ranks in $RANKS; do
  for transport in $TRANSPORTS; do
    for compression in $COMPRESSIONS; do
      check=--check
      [[ "$compression" == topk ]] && check=--no-check
      echo "==> $OP: $ranks ranks, $transport, compression $compression" >&2
      python3 "$ROOT/tools/mcclrun" -n "$ranks" --timeout 600 --no-prefix \
        --env "MCCL_TRANSPORT=$transport" --env "MCCL_COMPRESSION=$compression" -- \
        "$BENCH" -o "$OP" -b "$MIN" -e "$MAX" -f 4 "$check" --json - \
        | grep '^{' | python3 -c '
import json, sys
t, c = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    row = json.loads(line)
    row["transport"], row["compression"] = t, c
    print(json.dumps(row))' "$transport" "$compression" >> "$OUT/matrix.jsonl"
    done
  done
done

python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "matrix.jsonl"))]
wrong = [r for r in rows if r["check"] == "WRONG"]
key = lambda r: (r["ranks"], r["transport"], r["compression"])
with open(os.path.join(out, "matrix.md"), "w") as f:
    f.write("| ranks | transport | compression | bytes | algorithm | p50 (us) | algbw (GB/s) | busbw (GB/s) | check |\n")
    f.write("|---|---|---|---|---|---|---|---|---|\n")
    for r in sorted(rows, key=lambda r: key(r) + (r["bytes"],)):
        f.write(f"| {r['ranks']} | {r['transport']} | {r['compression']} | {r['bytes']} | {r['algorithm']} | "
                f"{r['p50_us']:.1f} | {r['algbw_gbs']:.3f} | {r['busbw_gbs']:.3f} | {r['check']} |\n")
print(open(os.path.join(out, "matrix.md")).read())
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import platform, time
    fig, ax = plt.subplots(figsize=(9, 5.5))
    # Colour tells ranks and transport apart, line style and marker the
    # compression: every series differs however many cells there are.
    worlds = sorted({(r["ranks"], r["transport"]) for r in rows})
    kinds = sorted({r["compression"] for r in rows})
    colours = plt.get_cmap("tab10" if len(worlds) <= 10 else "tab20")
    styles = ["-", "--", ":", "-."]
    marks = ["o", "s", "^", "D", "v", "x"]
    for k in sorted({key(r) for r in rows}):
        cell = sorted((r for r in rows if key(r) == k), key=lambda r: r["bytes"])
        w, c = worlds.index(k[:2]), kinds.index(k[2])
        ax.plot([r["bytes"] for r in cell], [r["algbw_gbs"] for r in cell],
                color=colours(w % colours.N), linestyle=styles[c % len(styles)],
                marker=marks[c % len(marks)], label=f"{k[0]} ranks, {k[1]}, {k[2]}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes, log scale)")
    ax.set_ylabel("algbw (GB/s)")
    op = rows[0].get("op", "allreduce") if rows else "allreduce"
    ax.set_title(f"mccl {op}: algorithm bandwidth by size\n"
                 f"{platform.node()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(os.path.join(out, "matrix.png"), dpi=120, bbox_inches="tight")
    print(f"wrote {out}/matrix.md and {out}/matrix.png")
except ImportError:
    print(f"wrote {out}/matrix.md (no matplotlib: no plot)")
if wrong:
    sys.exit(f"{len(wrong)} cell(s) WRONG: {[key(r) + (r['bytes'],) for r in wrong]}")
PY
