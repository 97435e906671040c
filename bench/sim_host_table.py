#!/usr/bin/env python3
"""mccl-sim's prediction for many ranks of one host against a measurement:
the results of bench/board_stage_rounds.sh (variants `table`: the host
board, and `engine`: the engine's algorithms over shared-memory links) and
mccl-sim for the same op, ranks and size, with the host's rates from
bench/host_memory.sh. Prints one table for the board (mccl-sim's board
model) and one for the engine (mccl-sim's simulated run of the algorithm
the measurement used), each cell the median p50 over the rounds.

    python3 bench/sim_host_table.py RESULTS --sim build/tools/mccl-sim [--sim-args "--host-memory ..."]
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from board_stage_table import read, size  # noqa: E402  (the results' reader, shared)


def simulate(sim, extra, ranks, op, nbytes, algorithm=None):
    cmd = [sim, "--ranks", str(ranks), "--ranks-per-host", str(ranks), "--op", op, "--bytes", str(nbytes), "--json", "-"]
    if algorithm:
        cmd += ["--algo", algorithm]
    # A one-host run takes well under a second; the bound keeps a stuck one from hanging the table.
    out = subprocess.run(cmd + shlex.split(extra), capture_output=True, text=True, check=True, timeout=600).stdout
    return json.loads(out[out.index("{"):])


def row(op, ranks, nbytes, algorithm, rounds, model_us):
    median = statistics.median(rounds)
    ratio = model_us / median
    mark = "yes" if abs(ratio - 1) <= 0.25 else "**no**"
    rounds_text = ", ".join(f"{r:.0f}" for r in rounds)
    return f"| {op} | {algorithm} | {ranks} | {size(nbytes)} | {rounds_text} | {median:.0f} | {model_us:.0f} | {ratio:.2f} | {mark} |"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--sim", required=True)
    ap.add_argument("--sim-args", default="")
    a = ap.parse_args()
    p50, algo = read(a.results)
    head = ("| op | algorithm | ranks | size | measured p50 (us), rounds | median | mccl-sim (us) | sim ÷ measured | within 25 % |\n"
            "|---|---|---|---|---|---|---|---|---|")
    for variant, title in (("table", "The host board (mccl-sim's board model)"),
                           ("engine", "The engine over shared-memory links (mccl-sim's simulated run)")):
        print(f"{title}:\n\n{head}")
        for (ranks, op, v, nbytes), rounds in sorted(p50.items()):
            if v != variant:
                continue
            measured_algo = algo.get((ranks, op, v, nbytes), "")
            if variant == "table":
                board = simulate(a.sim, a.sim_args, ranks, op, nbytes).get("board")
                if not board:
                    continue
                if board["algorithm"] != measured_algo:
                    print(f"<!-- {op} {ranks} {size(nbytes)}: measured {measured_algo}, modelled {board['algorithm']} -->")
                print(row(op, ranks, nbytes, board["algorithm"], rounds, board["modelled_s"] * 1e6))
            elif not measured_algo.startswith("board"):  # the banks still take a small enough op
                run = simulate(a.sim, a.sim_args, ranks, op, nbytes, measured_algo)
                print(row(op, ranks, nbytes, measured_algo, rounds, run["simulated_s"] * 1e6))
        print()


if __name__ == "__main__":
    main()
