#!/usr/bin/env python3
"""The table of bench/board_rs_rounds.sh: per ranks and size, the median
over rounds of each variant's p50 (us), the algorithm mccl ran, and each
mccl variant's median p50 over Open MPI's (sm).

    python3 bench/board_rs_table.py /tmp/board_rs
"""

import glob
import json
import os
import re
import statistics
import sys

VARIANTS = ["table", "engine", "rs64k", "rs256k", "rs1m", "mpi"]


def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1 << 10 else f"{b} B"


def main(folder):
    p50 = {}   # (ranks, variant, bytes) -> [p50, ...]
    algo = {}  # (ranks, variant, bytes) -> algorithm of the last round read
    for path in sorted(glob.glob(os.path.join(folder, "n*_*_r*.jsonl"))):
        m = re.match(r"n(\d+)_(\w+?)_r\d+\.jsonl$", os.path.basename(path))
        if not m:
            continue
        ranks, variant = int(m.group(1)), m.group(2)
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                key = (ranks, variant, row["bytes"])
                p50.setdefault(key, []).append(row["p50_us"])
                algo[key] = row.get("algorithm", "")
    for ranks in sorted({k[0] for k in p50}):
        print(f"\n{ranks} ranks, allreduce float32 sum, median p50 (us) over rounds [algorithm]; "
              "x: over Open MPI sm\n")
        shown = [v for v in VARIANTS if any(k[0] == ranks and k[1] == v for k in p50)]
        print("| size | " + " | ".join(shown) + " |")
        print("|---" * (len(shown) + 1) + "|")
        for b in sorted({k[2] for k in p50 if k[0] == ranks}):
            mpi = p50.get((ranks, "mpi", b))
            mpi_med = statistics.median(mpi) if mpi else None
            cells = []
            for v in shown:
                runs = p50.get((ranks, v, b))
                if not runs:
                    cells.append("-")
                    continue
                med = statistics.median(runs)
                cell = f"{med:.1f}"
                if v != "mpi":
                    cell += f" [{algo[(ranks, v, b)].split(' ')[0]}]"
                    if mpi_med:
                        cell += f" {med / mpi_med:.2f}x"
                cells.append(cell)
            print(f"| {size(b)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/board_rs")
