#!/usr/bin/env python3
"""The engine's latency and overlap targets, measured in one run.

    python3 bench/engine_targets.py --build build -n 2 --rounds 7

Each round runs, back to back on the same ranks count:

  allreduce 4 B                       the reference
  sendrecv 4 B                        target: <= 1.5 x allreduce 4 B
  allreduce 4 B, MCCL_TRANSPORT_CRC=1 target: <= 1.5 x allreduce 4 B
  allreduce 1 MiB x 8, one by one     (--batch 8)
  allreduce 1 MiB x 8, issued together then waited (--batch 8 --inflight)
                                      target: busbw >= one by one

and prints, per case, the median over the rounds of its p50 (and busbw),
and the median over the rounds of the ratio to its reference within the
same round (both ran within seconds of each other, so a slow spell of a
noisy machine hits both).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MCCLRUN = os.path.join(os.path.dirname(HERE), "tools", "mcclrun")

# name, mccl-bench arguments, extra environment, reference case, what the ratio compares
CASES = [
    ("allreduce 4 B", ["-o", "allreduce", "-b", "4", "-e", "4", "-n", "4000"], {}, None, None),
    ("sendrecv 4 B", ["-o", "sendrecv", "-b", "4", "-e", "4", "-n", "4000"], {},
     "allreduce 4 B", "p50"),
    ("allreduce 4 B, CRC", ["-o", "allreduce", "-b", "4", "-e", "4", "-n", "4000"],
     {"MCCL_TRANSPORT_CRC": "1"}, "allreduce 4 B", "p50"),
    ("allreduce 1 MiB x 8, one by one", ["-b", "1M", "-e", "1M", "-n", "100", "--batch", "8"],
     {}, None, None),
    ("allreduce 1 MiB x 8, together", ["-b", "1M", "-e", "1M", "-n", "100", "--batch", "8",
                                        "--inflight"],
     {}, "allreduce 1 MiB x 8, one by one", "busbw"),
]


def run(build, ranks, args, extra_env, timeout=120):
    """One mccl-bench row (rank 0's) of `build` on `ranks` ranks."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCCL_")}
    env.update(extra_env)
    env["LD_LIBRARY_PATH"] = os.path.abspath(build)
    cmd = [sys.executable, MCCLRUN, "-n", str(ranks), "--timeout", str(timeout), "--",
           os.path.join(build, "bench", "mccl-bench"), "--json", "-", "--no-check", *args]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout + 30)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    rows = [json.loads(line[4:]) for line in out.stdout.splitlines() if line.startswith("[0] {")]
    if len(rows) != 1:
        raise RuntimeError(f"{' '.join(cmd)}: expected one row from rank 0, got {len(rows)}")
    return rows[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="build directory (default: build)")
    ap.add_argument("-n", "--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    opts = ap.parse_args()

    results = {name: [] for name, *_ in CASES}
    for r in range(opts.rounds):
        for name, args, env, _, _ in CASES:
            results[name].append(run(opts.build, opts.ranks, args, env))
        print(f"round {r + 1}/{opts.rounds} done", file=sys.stderr)

    print(f"{opts.ranks} ranks, {opts.rounds} rounds; medians over the rounds; ratio: "
          f"median over the rounds of this case / its reference in the same round\n")
    print("| case | p50 (us) | busbw (GB/s) | compared with | ratio |")
    print("|---|---|---|---|---|")
    for name, _, _, ref, what in CASES:
        rows = results[name]
        p50 = statistics.median(row["p50_us"] for row in rows)
        busbw = statistics.median(row["busbw_gbs"] for row in rows)
        ratio = ""
        if ref:
            key = "p50_us" if what == "p50" else "busbw_gbs"
            ratio = statistics.median(row[key] / base[key] for row, base in zip(rows, results[ref]))
            ratio = f"{what} {ratio:.2f}"
        print(f"| {name} | {p50:.1f} | {busbw:.3f} | {ref or ''} | {ratio} |")


if __name__ == "__main__":
    main()
