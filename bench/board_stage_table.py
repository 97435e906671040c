#!/usr/bin/env python3
"""The tables of bench/board_stage_rounds.sh: per op, ranks and size, the
median over rounds of each variant's p50 (us), the algorithm mccl ran,
each mccl variant's median over Open MPI's on the same transport, and the
slowest round of mccl's built-in table (or, without it, of its TCP runs)
over its median: a round above 2x fell into a slow mode.

    python3 bench/board_stage_table.py /tmp/board_stage [more folders ...]
"""

import glob
import json
import os
import re
import statistics
import sys

VARIANTS = ["table", "before", "engine", "rs64k", "rs256k", "rs1m", "mpi", "tcp", "mpitcp"]
# Whose Open MPI run each variant is compared with: its transport's.
BASELINE = {"table": "mpi", "before": "mpi", "engine": "mpi", "rs64k": "mpi", "rs256k": "mpi", "rs1m": "mpi", "tcp": "mpitcp"}


def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1 << 10 else f"{b} B"


def read(folders):
    """(ranks, op, variant, bytes) -> [p50 per round]; and -> algorithm."""
    p50, algo = {}, {}
    for folder in folders:
        for path in sorted(glob.glob(os.path.join(folder, "n*_r*.jsonl"))):
            m = re.match(r"n(\d+)_(\w+)_(" + "|".join(VARIANTS) + r")_r\d+\.jsonl$", os.path.basename(path))
            if not m:
                continue
            ranks, op, variant = int(m.group(1)), m.group(2), m.group(3)
            with open(path) as f:
                for line in f:
                    line = line.strip()
                    if not line:
                        continue
                    row = json.loads(line)
                    key = (ranks, op, variant, row["bytes"])
                    p50.setdefault(key, []).append(row["p50_us"])
                    algo[key] = row.get("algorithm", "")
    return p50, algo


def main(folders):
    p50, algo = read(folders)
    worst = []  # (ratio, where) of the table's slowest rounds
    for op in sorted({k[1] for k in p50}):
        for ranks in sorted({k[0] for k in p50 if k[1] == op}):
            print(f"\n{op}, {ranks} ranks, float32, median p50 (us) over rounds [algorithm] "
                  "x: over Open MPI on the same transport; spread: mccl's slowest round over its median\n")
            shown = [v for v in VARIANTS if any(k[:3] == (ranks, op, v) for k in p50)]
            print("| size | rounds | " + " | ".join(shown) + " | spread |")
            print("|---" * (len(shown) + 3) + "|")
            for b in sorted({k[3] for k in p50 if k[:2] == (ranks, op)}):
                cells = []
                for v in shown:
                    runs = p50.get((ranks, op, v, b))
                    if not runs:
                        cells.append("-")
                        continue
                    med = statistics.median(runs)
                    cell = f"{med:.1f}"
                    if v in BASELINE:
                        cell += f" [{algo[(ranks, op, v, b)].split(' ')[0]}]"
                        base = p50.get((ranks, op, BASELINE[v], b))
                        if base:
                            cell += f" {med / statistics.median(base):.2f}x"
                    cells.append(cell)
                table = p50.get((ranks, op, "table", b)) or p50.get((ranks, op, "tcp", b), [])
                spread = max(table) / statistics.median(table) if table else 0
                if table:
                    worst.append((spread, f"{op} {ranks} ranks {size(b)}"))
                print(f"| {size(b)} | {len(table)} | " + " | ".join(cells) + f" | {spread:.2f} |")
    if worst:
        worst.sort(reverse=True)
        print("\nslowest rounds of mccl over their cell's median: "
              + ", ".join(f"{w} {r:.2f}x" for r, w in worst[:5]))


if __name__ == "__main__":
    main(sys.argv[1:] or ["/tmp/board_stage"])
