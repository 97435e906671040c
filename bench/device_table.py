#!/usr/bin/env python3
"""Medians over rounds of p50 and busbw per size from the roundN_*.txt tables that
bench/device_rounds.sh wrote into a results folder, as markdown on stdout.

  python3 bench/device_table.py bench/shm_16 1 2 3
  python3 bench/device_table.py bench/board_16 1 2 3 --before bench/shm_16

With --before DIR it adds mccl shm p50 against DIR's rounds BEFORE_ROUNDS (an
earlier build), and the algorithm mccl-bench printed per size.
"""
import re
import statistics
import sys
from pathlib import Path

BEFORE_ROUNDS = [1, 2, 3]
VARIANTS = ["mccl", "mccltcp", "mpism", "mpitcp"]


def parse(path):
    rows = {}
    for line in path.read_text().splitlines():
        line = re.sub(r"^\[\d+\]\s*", "", line).strip()
        if not line or line.startswith("#"):
            continue
        f = line.split()
        if len(f) >= 7 and f[0].isdigit():
            # p50 us, busbw GB/s, check, algorithm (mccl-bench only)
            rows[int(f[0])] = (float(f[2]), float(f[5]), f[6], " ".join(f[7:]))
    return rows


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def human(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n:
            return f"{b // n} {unit}"
    return f"{b} B"


def main(here, rounds, before_dir=None):
    data = {v: [parse(here / f"round{r}_{v}.txt") for r in rounds] for v in VARIANTS + ["mccl4", "mpism4"]}
    bad = [(v, r) for v in data for r, t in zip(rounds, data[v]) for s in t if t[s][2] != "ok"]
    sizes = sorted(data["mccl"][0])
    p = {v: {s: med([t[s][0] for t in data[v] if s in t]) for s in sizes} for v in VARIANTS}
    b = {v: {s: med([t[s][1] for t in data[v] if s in t]) for s in sizes} for v in VARIANTS}
    print(f"Medians over rounds {', '.join(map(str, rounds))} ({len(rounds)} values per cell); "
          "p50 in µs, busbw in GB/s; busbw median taken over the rounds' busbw values.\n")
    print("| size | mccl shm p50 | mccl tcp p50 | MPI sm p50 | MPI tcp p50 "
          "| mccl shm busbw | mccl tcp busbw | MPI sm busbw | MPI tcp busbw "
          "| p50 mccl-shm / MPI-sm | busbw mccl-shm / MPI-sm |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in sizes:
        # busbw is printed with 3 decimals: below 0.010 GB/s the ratio means nothing
        rb = b["mccl"][s] / b["mpism"][s] if min(b["mccl"][s], b["mpism"][s]) >= 0.01 else float("nan")
        print(f"| {human(s)} | " + " | ".join(f"{p[v][s]:.1f}" for v in VARIANTS) + " | "
              + " | ".join(f"{b[v][s]:.3f}" for v in VARIANTS)
              + f" | {p['mccl'][s] / p['mpism'][s]:.2f} | "
              + ("–" if rb != rb else f"{rb:.2f}") + " |")
    big = 64 << 20
    print()
    for name, v16, v4 in (("mccl shm", "mccl", "mccl4"), ("Open MPI sm", "mpism", "mpism4")):
        b4 = med([t[big][1] for t in data[v4]])
        p4 = med([t[big][0] for t in data[v4]])
        vals4 = ", ".join(f"{t[big][1]:.3f}" for t in data[v4])
        vals16 = ", ".join(f"{t[big][1]:.3f}" for t in data[v16])
        print(f"- {name}, 64 MiB allreduce: 4 ranks busbw {b4:.3f} GB/s (p50 {p4:.1f} µs; rounds: {vals4}), "
              f"16 ranks busbw {b[v16][big]:.3f} GB/s (p50 {p[v16][big]:.1f} µs; rounds: {vals16}); "
              f"16-rank / 4-rank = {b[v16][big] / b4:.2f}"
              f" ({'within' if b[v16][big] >= 0.8 * b4 else 'NOT within'} 20%)")
    print(f"\nCheck column: {'all ok' if not bad else 'NOT ok in ' + str(bad)}")
    if before_dir is None:
        return

    before = {v: [parse(before_dir / f"round{r}_{v}.txt") for r in BEFORE_ROUNDS] for v in ("mccl", "mpism")}
    pb = {v: {s: med([t[s][0] for t in before[v] if s in t]) for s in sizes} for v in before}
    algs = {v: {s: sorted({t[s][3] for t in data[v] if s in t}) for s in sizes} for v in ("mccl", "mccltcp")}
    print(f"\nmccl shm (MCCL_TRANSPORT=auto) p50, before ({before_dir.name}, rounds "
          f"{', '.join(map(str, BEFORE_ROUNDS))}, median) and now (rounds {', '.join(map(str, rounds))}, median); "
          "the two were measured in different machine sessions, so Open MPI sm, unchanged, is shown the same way "
          "as a reference for the difference between sessions. Algorithm: as mccl-bench printed it "
          "(\" / \" between differing rounds).\n")
    print(f"| size | mccl shm p50 before ({before_dir.name}) | mccl shm p50 now | mccl now / before "
          f"| MPI sm p50 before ({before_dir.name}) | MPI sm p50 now | MPI sm now / before "
          "| algorithm now, mccl shm | algorithm now, mccl tcp |")
    print("|---:|---:|---:|---:|---:|---:|---:|:---|:---|")
    for s in sizes:
        print(f"| {human(s)} | {pb['mccl'][s]:.1f} | {p['mccl'][s]:.1f} | {p['mccl'][s] / pb['mccl'][s]:.2f} | "
              f"{pb['mpism'][s]:.1f} | {p['mpism'][s]:.1f} | {p['mpism'][s] / pb['mpism'][s]:.2f} | "
              f"{' / '.join(algs['mccl'][s])} | {' / '.join(algs['mccltcp'][s])} |")
    print("\nmccl shm p50 per round (µs), now: "
          + "; ".join(f"{human(s)} " + ", ".join(f"{t[s][0]:.1f}" for t in data["mccl"]) for s in sizes if s <= 16 << 10))

if __name__ == "__main__":
    args = sys.argv[1:]
    before = None
    if "--before" in args:
        i = args.index("--before")
        before = Path(args[i + 1])
        del args[i:i + 2]
    main(Path(args[0]), [int(a) for a in args[1:]] or [1, 2, 3], before)
