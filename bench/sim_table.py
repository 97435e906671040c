#!/usr/bin/env python3
"""Every algorithm of allreduce, broadcast, allgather and reduce_scatter
(and reduce) on mccl-sim at several world sizes: simulated time against
the α–β model, as a markdown table (docs/performance.md, "Simulated worlds").

    python3 bench/sim_table.py [--sim build/tools/mccl-sim] [--ranks 64 256 1024]
                               [--bytes 64M] [--jsonl out.jsonl] > table.md

Each cell is one mccl-sim run (10 us, 10 Gbit/s between ranks, one rank
per host); every element of every rank's result is checked by mccl-sim.
"""

import argparse
import json
import subprocess
import sys
import time

ALGORITHMS = {
    "allreduce": ["ring", "bidir_ring", "rd", "rabenseifner"],
    "broadcast": ["tree", "chain", "scatter_allgather"],
    "allgather": ["ring", "bidir_ring", "rd"],
    "reduce_scatter": ["ring", "rd"],
    "reduce": ["tree"],
}


def run(sim, ranks, op, algo, size):
    cmd = [sim, "--ranks", str(ranks), "--op", op, "--algo", algo, "--bytes", size, "--json", "-"]
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    text = done.stdout[done.stdout.index("{"):] if "{" in done.stdout else "{}"
    result = json.loads(text)
    result["rc"] = done.returncode
    result["wall_total_s"] = time.monotonic() - start
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default="build/tools/mccl-sim")
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--bytes", default="64M")
    ap.add_argument("--jsonl")
    args = ap.parse_args()
    rows = []
    out = open(args.jsonl, "w") if args.jsonl else None
    for op, algos in ALGORITHMS.items():
        for algo in algos:
            for ranks in args.ranks:
                r = run(args.sim, ranks, op, algo, args.bytes)
                rows.append((op, algo, ranks, r))
                if out:
                    out.write(json.dumps(r) + "\n")
                    out.flush()
                print(f"{op} {algo} {ranks}: {r.get('ratio')} (wall {r['wall_total_s']:.1f} s)", file=sys.stderr)
    print(f"| op | algorithm | ranks | simulated ms | predicted ms | ratio | checked | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for op, algo, ranks, r in rows:
        ok = "ok" if r.get("rc") == 0 and r.get("mismatches") == 0 else f"rc {r.get('rc')}"
        pred = r.get("predicted_s")
        ratio = r.get("ratio")
        print(f"| {op} | {r.get('algorithm', algo)} | {ranks} | {r.get('simulated_s', 0) * 1e3:.2f} | "
              f"{pred * 1e3:.2f} | {ratio:.3f} | {ok} | {r['wall_total_s']:.1f} |" if pred else
              f"| {op} | {algo} | {ranks} | - | - | - | {ok} | {r['wall_total_s']:.1f} |")


if __name__ == "__main__":
    main()
