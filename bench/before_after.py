#!/usr/bin/env python3
"""Two builds of mccl side by side: the same mccl-bench runs, alternating.

    python3 bench/before_after.py --before /path/to/old/build --after build \\
        -n 2 --ops allreduce,broadcast,allgather -b 4 -e 64M -f 4 --rounds 3

Each round runs every op once with each build, the order of the builds
swapped every round, so drift on a noisy machine hits both alike. Per
(op, size) the table shows the median over the rounds of each build's p50
and busbw, and the median over the rounds of after/before p50 within a
round (below 1 is an improvement), with the number of rounds after won.
Each build's mccl-bench runs with its own libmccl (LD_LIBRARY_PATH set to
the build directory), launched by that build's own mcclrun (its
tools/mcclrun, which sets what that version reads), else this checkout's.
--transport picks MCCL_TRANSPORT for both; --sizes runs a list of sizes
instead of -b/-e/-f.

Writes --out (default out/before_after/): rows.jsonl with every row of
every run, and table.md.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MCCLRUN = os.path.join(ROOT, "tools", "mcclrun")


def run(build, ranks, op, args, timeout, transport=None):
    """mccl-bench of `build` on `ranks` ranks; the rows rank 0 printed."""
    bench = os.path.join(build, "bench", "mccl-bench")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCCL_")}
    env["LD_LIBRARY_PATH"] = os.path.abspath(build)
    if transport:
        env["MCCL_TRANSPORT"] = transport
    own = os.path.join(build, "tools", "mcclrun")
    mcclrun = own if os.path.exists(own) else MCCLRUN
    cmd = [sys.executable, mcclrun, "-n", str(ranks), "--timeout", str(timeout), "--",
           bench, "--op", op, "--json", "-", "--no-check", *args]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout + 30)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    rows = []
    for line in out.stdout.splitlines():
        # mcclrun prefixes each line with "[rank] "; rank 0 prints the rows.
        if line.startswith("[0] {"):
            rows.append(json.loads(line[4:]))
    return rows


def table(results, ops, ranks, rounds, transport=""):
    """The markdown table: per (op, size) each build's median p50 and busbw,
    and the median over rounds of after/before within one round (both builds
    ran back to back, so a slow spell of the machine hits both: steadier
    than the ratio of the medians)."""
    lines = [f"{ranks} ranks{', ' + transport if transport else ''}, {rounds} rounds. p50 and busbw: median over the rounds of each build. "
             f"after/before: median over the rounds of the two builds' p50 ratio in that round "
             f"(below 1: after is faster); faster: rounds in which after's p50 was the lower.", "",
             "| op | bytes | p50 before (us) | p50 after (us) | after/before | faster | "
             "busbw before (GB/s) | busbw after (GB/s) |",
             "|---|---|---|---|---|---|---|---|"]
    for op in ops:
        for size in sorted({b for (o, b, _) in results if o == op}):
            before = results.get((op, size, "before"), {})
            after = results.get((op, size, "after"), {})
            paired = [after[r][0] / before[r][0] for r in before if r in after and before[r][0] > 0]
            if not paired:
                continue
            med = lambda rows, i: statistics.median(v[i] for v in rows.values())
            faster = sum(1 for x in paired if x < 1)
            lines.append(f"| {op} | {size} | {med(before, 0):.1f} | {med(after, 0):.1f} | "
                         f"{statistics.median(paired):.2f} | {faster}/{len(paired)} | "
                         f"{med(before, 1):.3f} | {med(after, 1):.3f} |")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("-n", "--ranks", type=int, default=2)
    p.add_argument("--ops", default="allreduce")
    p.add_argument("-b", "--min", default="4")
    p.add_argument("-e", "--max", default="64M")
    p.add_argument("-f", "--factor", default="4")
    p.add_argument("--sizes", default="", help="comma-separated sizes (4,64K,1M,64M) instead of -b/-e/-f")
    p.add_argument("--transport", default="", help="MCCL_TRANSPORT for both builds (default: theirs)")
    p.add_argument("--iters", type=int, default=0)
    p.add_argument("--seconds", default="", help="mccl-bench -t: time each size for about this long")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "out", "before_after"))
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    ranges = [["-b", s, "-e", s] for s in a.sizes.split(",")] if a.sizes else [
        ["-b", a.min, "-e", a.max, "-f", a.factor]]
    if a.iters:
        ranges = [r + ["-n", str(a.iters)] for r in ranges]
    elif a.seconds:
        ranges = [r + ["-t", a.seconds] for r in ranges]
    builds = {"before": a.before, "after": a.after}
    results = {}  # (op, bytes, build) -> {round: (p50, busbw)}
    with open(os.path.join(a.out, "rows.jsonl"), "w") as log:
        for rnd in range(a.rounds):
            order = ["before", "after"] if rnd % 2 == 0 else ["after", "before"]
            for op in a.ops.split(","):
                for name in order:
                    print(f"# round {rnd + 1}/{a.rounds}: {op} {name}", file=sys.stderr)
                    for bench_args in ranges:
                        for row in run(builds[name], a.ranks, op, bench_args, a.timeout, a.transport):
                            row.update(build=name, round=rnd, op=op, transport=a.transport)
                            log.write(json.dumps(row) + "\n")
                            results.setdefault((op, row["bytes"], name), {})[rnd] = (
                                row["p50_us"], row["busbw_gbs"])
    lines = table(results, a.ops.split(","), a.ranks, a.rounds, a.transport)
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
