#!/usr/bin/env python3
"""Markdown tables of the allreduce scaling rounds that bench/scaling_rounds.sh
wrote: per rank count and size, the median over rounds of p50 latency (µs) and
of busbw (GB/s) for mccl (shm), mccl (tcp), Open MPI sm, Open MPI tcp and torch
gloo, plus the ratios the targets need:

  - 16 ranks, 4 B, mccl over TCP: p50 against 40 µs and against Open MPI tcp
    (measured in the same rounds);
  - busbw of mccl (tcp, and shm) / the best TCP peer (max of gloo and Open MPI
    tcp) for every size from 1 MiB up, target >= 1.5;
  - mccl shm against Open MPI sm (p50 and busbw).

    python3 bench/scaling_table.py ROUND_DIR [ROUND_DIR ...] [--sizes 4,64K,1M,16M,64M | --all]
    python3 bench/scaling_table.py bench/scaling_16/scaling_round*      # after the device runs
    python3 bench/scaling_table.py bench/scaling_16                     # same: a folder of round folders
    python3 bench/scaling_table.py /tmp/scaling_res/scaling_round1      # a local trial

Each ROUND_DIR holds <system>_n<ranks>.txt files (mccl-bench, mpi-bench and
bench/torch_gloo_bench.py tables; "[r] " prefixes of mcclrun are stripped). A
missing, skipped, failed or timed-out cell shows "-" (sizes it printed before
being stopped still count); such cells are listed under the tables. A median
taken over fewer rounds than were given is marked "(k)" with its count.
"""
import argparse
import re
import statistics
import sys
from pathlib import Path

SYSTEMS = [("mccl", "mccl shm"), ("mccltcp", "mccl tcp"), ("mpism", "MPI sm"),
           ("mpitcp", "MPI tcp"), ("gloo", "gloo")]
TCP_PEERS = ("gloo", "mpitcp")
TARGET_US = 40.0      # 16-rank 4 B allreduce over TCP
TARGET_BW = 1.5       # busbw vs the best TCP peer, from 1 MiB up
DEFAULT_SIZES = "4,1K,64K,1M,4M,16M,64M"


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)(i?B)?", text.strip(), re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2).upper()]


def human(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"


def parse(path):
    """{bytes: (p50 us, busbw GB/s, check)} and a problem string or None."""
    if not path.exists():
        return {}, "missing"
    rows, problem = {}, None
    for line in path.read_text(errors="replace").splitlines():
        line = re.sub(r"^\[\d+\]\s*", "", line).strip()
        if line.startswith("# skipped"):
            problem = line[2:]
        m = re.match(r"# rc=(\d+)", line)
        if m and m.group(1) != "0":
            problem = f"rc={m.group(1)}" + (" (timed out)" if m.group(1) == "124" else "")
        if not line or line.startswith("#"):
            continue
        f = line.split()
        if len(f) >= 7 and f[0].isdigit():
            try:
                rows[int(f[0])] = (float(f[2]), float(f[5]), f[6])
            except ValueError:
                continue
    bad = sorted(s for s, r in rows.items() if r[2] not in ("ok", "-"))
    if bad:
        problem = (problem + "; " if problem else "") + "check not ok at " + ", ".join(human(s) for s in bad)
    return rows, problem


def round_dirs(args):
    dirs = []
    for a in args:
        p = Path(a)
        if not p.is_dir():
            sys.exit(f"scaling_table: {p} is not a folder")
        if any(p.glob("*_n*.txt")):
            dirs.append(p)
        else:
            sub = sorted(q for q in p.iterdir() if q.is_dir() and any(q.glob("*_n*.txt")))
            if not sub:
                sys.exit(f"scaling_table: no <system>_n<ranks>.txt in {p} or its folders")
            dirs.extend(sub)
    return dirs


def fmt(x, nd=1):
    return "-" if x is None else f"{x:.{nd}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--sizes", default=DEFAULT_SIZES,
                    help=f"comma-separated sizes to show (default {DEFAULT_SIZES})")
    ap.add_argument("--all", action="store_true", help="show every size found")
    o = ap.parse_args()
    dirs = round_dirs(o.dirs)
    nrounds = len(dirs)

    # data[(sys, n)] = list over rounds of {bytes: (p50, busbw, check)}
    data, problems, ranks, found = {}, [], set(), set()
    for d in dirs:
        for f in d.glob("*_n*.txt"):
            m = re.fullmatch(r"(\w+?)_n(\d+)\.txt", f.name)
            if m:
                ranks.add(int(m.group(2)))
    for d in dirs:
        for sysname, _ in SYSTEMS:
            for n in sorted(ranks):
                rows, problem = parse(d / f"{sysname}_n{n}.txt")
                if problem:
                    problems.append(f"{d.name} {sysname} n={n}: {problem}")
                # a size whose check failed does not count
                data.setdefault((sysname, n), []).append(
                    {s: r for s, r in rows.items() if r[2] in ("ok", "-")})
                found.update(rows)
    sizes = sorted(found) if o.all else [parse_size(s) for s in o.sizes.split(",")]

    def values(sysname, n, s, k):
        return [t[s][k] for t in data.get((sysname, n), []) if s in t]

    def med(sysname, n, s, k):
        v = values(sysname, n, s, k)
        return statistics.median(v) if v else None

    def cell(sysname, n, s, k, nd):
        v = values(sysname, n, s, k)
        if not v:
            return "-"
        text = f"{statistics.median(v):.{nd}f}"
        return text if len(v) == nrounds else f"{text} ({len(v)})"

    def ratio(a, b, min_val=0.0):
        if a is None or b is None or b == 0 or min(a, b) < min_val:
            return None
        return a / b

    def best_tcp(n, s):
        c = [(med(p, n, s, 1), p) for p in TCP_PEERS]
        c = [x for x in c if x[0] is not None]
        return max(c) if c else (None, None)

    print(f"Allreduce, float32 sum. Medians over {nrounds} round(s): "
          + ", ".join(d.name for d in dirs) + ". p50 in µs (per iteration the slowest rank; "
          "median of the rounds' p50), busbw in GB/s (algbw * 2(n-1)/n; median of the rounds' busbw). "
          "\"-\": no value; \"(k)\": median of k rounds only.\n")

    names = " | ".join(label for _, label in SYSTEMS)
    print("### p50 latency (µs)\n")
    print(f"| ranks | size | {names} | mccl tcp / MPI tcp | mccl shm / MPI sm |")
    print("|---:|---:|" + "---:|" * (len(SYSTEMS) + 2))
    for n in sorted(ranks):
        for s in sizes:
            r1 = ratio(med("mccltcp", n, s, 0), med("mpitcp", n, s, 0))
            r2 = ratio(med("mccl", n, s, 0), med("mpism", n, s, 0))
            print(f"| {n} | {human(s)} | " + " | ".join(cell(k, n, s, 0, 1) for k, _ in SYSTEMS)
                  + f" | {fmt(r1, 2)} | {fmt(r2, 2)} |")

    print("\n### busbw (GB/s)\n")
    print("Best TCP peer: the larger busbw of gloo (g) and Open MPI tcp (m). "
          f"Target from 1 MiB up: mccl / best TCP peer >= {TARGET_BW}.\n")
    print(f"| ranks | size | {names} | best TCP peer | mccl tcp / best TCP | mccl shm / best TCP "
          "| mccl shm / MPI sm |")
    print("|---:|---:|" + "---:|" * len(SYSTEMS) + "---:|---:|---:|---:|")
    for n in sorted(ranks):
        for s in sizes:
            bt, who = best_tcp(n, s)
            r_tcp = ratio(med("mccltcp", n, s, 1), bt, 0.01)
            r_shm = ratio(med("mccl", n, s, 1), bt, 0.01)
            r_sm = ratio(med("mccl", n, s, 1), med("mpism", n, s, 1), 0.01)
            peer = "-" if bt is None else f"{bt:.3f} ({'g' if who == 'gloo' else 'm'})"
            print(f"| {n} | {human(s)} | " + " | ".join(cell(k, n, s, 1, 3) for k, _ in SYSTEMS)
                  + f" | {peer} | {fmt(r_tcp, 2)} | {fmt(r_shm, 2)} | {fmt(r_sm, 2)} |")

    print("\n### Targets\n")
    n16 = max(ranks) if ranks else 16
    p = med("mccltcp", n16, 4, 0)
    pm = med("mpitcp", n16, 4, 0)
    per_round = ", ".join(fmt(x) for x in values("mccltcp", n16, 4, 0)) or "-"
    per_round_m = ", ".join(fmt(x) for x in values("mpitcp", n16, 4, 0)) or "-"
    if p is None:
        print(f"- {n16} ranks, 4 B, mccl tcp: no value")
    else:
        print(f"- {n16} ranks, 4 B allreduce over TCP: mccl {p:.1f} µs (rounds: {per_round}); "
              f"target {TARGET_US:.0f} µs: mccl / target = {p / TARGET_US:.2f} "
              f"({'met' if p <= TARGET_US else 'NOT met'}); Open MPI tcp {fmt(pm)} µs (rounds: {per_round_m}), "
              f"mccl / Open MPI tcp = {fmt(ratio(p, pm), 2)}"
              + ("" if n16 == 16 else f" (largest rank count here is {n16}, not 16)"))
    for n in sorted(ranks):
        big = [s for s in (sorted(found)) if s >= 1 << 20]
        for label, k in (("mccl tcp", "mccltcp"), ("mccl shm", "mccl")):
            rs = [(ratio(med(k, n, s, 1), best_tcp(n, s)[0], 0.01), s) for s in big]
            rs = [(r, s) for r, s in rs if r is not None]
            if not rs:
                print(f"- {n} ranks, {label} busbw / best TCP peer from 1 MiB up: no value")
                continue
            worst = min(rs)
            print(f"- {n} ranks, {label} busbw / best TCP peer from 1 MiB up: lowest {worst[0]:.2f} at "
                  f"{human(worst[1])} (" + ", ".join(f"{human(s)} {r:.2f}" for r, s in rs) + "); "
                  f"target {TARGET_BW}: {'met' if worst[0] >= TARGET_BW else 'NOT met'}"
                  + ("" if len(rs) == len(big) else f" ({len(big) - len(rs)} size(s) without a value)"))
    if problems:
        print("\nCells not complete (sizes printed before a stop still count; sizes whose check failed do not):\n")
        for pr in problems:
            print(f"- {pr}")


if __name__ == "__main__":
    main()
