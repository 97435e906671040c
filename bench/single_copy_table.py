#!/usr/bin/env python3
"""Medians over rounds of busbw from the tables bench/single_copy_rounds.sh
wrote into a folder: rings, single copy and Open MPI sm side by side, as
markdown on stdout.

  python3 bench/single_copy_table.py bench/single_copy_16
"""
import collections
import re
import statistics
import sys
from pathlib import Path

VARIANTS = ("0", "64K", "mpi")


def main():
    folder = Path(sys.argv[1])
    busbw = collections.defaultdict(list)
    for path in folder.glob("r*_n*_*.txt"):
        m = re.fullmatch(r"r(\d+)_n(\d+)_(\w+?)_(0|64K|mpi)\.txt", path.name)
        if not m:
            continue
        _, ranks, op, variant = m.groups()
        for line in path.read_text().splitlines():
            f = re.sub(r"^\[\d+\]\s*", "", line).split()
            if len(f) >= 7 and f[0].isdigit():
                busbw[(int(ranks), op, int(f[0]), variant)].append(float(f[5]))
    print("| ranks | op | size | rings (GB/s) | single copy | Open MPI sm | single ÷ rings | single ÷ Open MPI |")
    print("|---|---|---|---|---|---|---|---|")
    for ranks, op, size in sorted({k[:3] for k in busbw}):
        med = {v: statistics.median(busbw[(ranks, op, size, v)])
               for v in VARIANTS if (ranks, op, size, v) in busbw}
        if len(med) < len(VARIANTS):
            continue
        print(f"| {ranks} | {op} | {size >> 20} MiB | {med['0']:.2f} | {med['64K']:.2f} | {med['mpi']:.2f} | "
              f"{med['64K'] / med['0']:.2f}× | {med['64K'] / med['mpi']:.2f}× |")


if __name__ == "__main__":
    main()
