#!/usr/bin/env python3
"""Compare training runs of examples/ddp_dummy_train.py (--save-stats).

    python3 examples/benchmark_throughput.py --baseline base.json \
        --ddp mccl_1.json gloo_1.json mccl_2.json gloo_2.json -o my_bench

Runs with the same label (mccl, gloo, ... ; --label in the training script)
are repeats: their samples/s are summarised by the median. Prints a table
(label, runs, median samples/s, ratio to the baseline and to every other
label), writes NAME.npz (per label: samples/s of each run, all step times,
losses) and, with matplotlib, NAME.png (step time distribution per label)
and NAME_bars.png (median samples/s per label, with each run's value).
"""

import argparse
import json
import statistics
import sys

import numpy as np


def load(paths):
    runs = {}
    for path in paths:
        with open(path) as f:
            stats = json.load(f)
        runs.setdefault(stats["label"], []).append(stats)
    return runs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", nargs="*", default=[], metavar="A.json", help="single-process runs")
    p.add_argument("--ddp", nargs="+", required=True, metavar="B.json", help="DDP runs")
    p.add_argument("-o", "--output", required=True, metavar="NAME")
    args = p.parse_args(argv)

    runs = load(args.baseline + args.ddp)
    median = {label: statistics.median(r["samples_per_s"] for r in rs) for label, rs in runs.items()}
    labels = list(runs)
    print(f"| run | ranks | runs | median samples/s | each run |")
    print(f"|---|---|---|---|---|")
    for label in labels:
        each = ", ".join(f"{r['samples_per_s']:.2f}" for r in runs[label])
        print(f"| {label} | {runs[label][0]['world_size']} | {len(runs[label])} | {median[label]:.2f} | {each} |")
    print()
    for a in labels:
        for b in labels:
            if a != b:
                print(f"{a} / {b}: {median[a] / median[b]:.2f}x")

    arrays = {}
    for label, rs in runs.items():
        arrays[f"{label}_samples_per_s"] = np.array([r["samples_per_s"] for r in rs])
        arrays[f"{label}_step_times_s"] = np.concatenate([np.array(r["step_times_s"]) for r in rs])
        arrays[f"{label}_loss"] = np.concatenate([np.array(r["loss"]) for r in rs])
    arrays["labels"] = np.array(labels)
    np.savez(args.output + ".npz", **arrays)
    print(f"\nwrote {args.output}.npz")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (python3 -m pip install matplotlib); no plots",
              file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    x = np.arange(len(labels))
    ax.bar(x, [median[label] for label in labels], color="#9cc3e6", label="median")
    for i, label in enumerate(labels):
        ax.plot([i] * len(runs[label]), [r["samples_per_s"] for r in runs[label]], "k.", label="runs" if i == 0 else None)
    ax.set_xticks(x, [f"{label}\n({runs[label][0]['world_size']} rank(s))" for label in labels])
    ax.set_ylabel("samples/s")
    first = runs[labels[0]][0]
    ax.set_title(f"training throughput, global batch {first['global_batch']}, "
                 f"{parameter_text(first['parameters'])}")
    # Above the bars, never over them: the axis grows to make room.
    ax.set_ylim(0, max(max(r["samples_per_s"] for r in runs[label]) for label in labels) * 1.25)
    ax.legend(loc="upper center", ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(args.output + "_bars.png", dpi=120)
    fig, ax = plt.subplots(figsize=(6, 4))
    # Tick labels set apart: boxplot's own keyword for them was renamed in
    # matplotlib 3.9 (labels -> tick_labels) and the old name removed in 3.11.
    ax.boxplot([arrays[f"{label}_step_times_s"] * 1000 for label in labels])
    ax.set_xticks(range(1, len(labels) + 1), labels)
    ax.set_ylabel("step time (ms)")
    ax.set_title(f"time per training step, global batch {first['global_batch']}, "
                 f"{parameter_text(first['parameters'])}")
    fig.tight_layout()
    fig.savefig(args.output + ".png", dpi=120)
    print(f"wrote {args.output}.png and {args.output}_bars.png")


def parameter_text(n):
    """412000 -> "0.412M parameters" (not "0M"), 2.5e9 -> "2.5B parameters"."""
    if n >= 1e9:
        return f"{n / 1e9:.3g}B parameters"
    if n >= 1e5:
        return f"{n / 1e6:.3g}M parameters"
    if n >= 1e3:
        return f"{n / 1e3:.3g}K parameters"
    return f"{n} parameters"


if __name__ == "__main__":
    main()
