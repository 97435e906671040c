#!/usr/bin/env python3
"""mccl side by side with Gloo and Open MPI, on the same machine, in one run.

    python3 bench/compare.py                      # 2 ranks, allreduce, 4 B .. 64 MiB, 3 rounds
    python3 bench/compare.py -n 4 --ops allreduce,broadcast,allgather -e 256M

Each round runs every library variant once per op, in an order that rotates
between rounds, so drift on a noisy machine hits all of them alike:

  mccl      mcclrun -n N -- mccl-bench (built-in algorithm table) with
            MCCL_TRANSPORT=auto: shared memory between the ranks of one host
  mccl-tcp  the same with MCCL_TRANSPORT=tcp: loopback TCP (--no-mccl-tcp skips it)
  gloo      mcclrun -n N -- gloo-bench -a ALGO, for each Gloo algorithm (TCP)
  mpi       bench/run_mpi_bench.sh N tcp (TCP over loopback) and N sm (shared memory)

Each mccl variant is compared with the peer on the same medium. mccl (shared
memory) against Open MPI over shared memory: ratios mccl busbw / MPI sm busbw
and mccl p50 / MPI sm p50. mccl-tcp against the best TCP peer (Gloo's best
algorithm or Open MPI over TCP): ratios mccl-tcp busbw / best peer busbw and
mccl-tcp p50 / peer p50. The machine's limits are measured in the same run:
loopback TCP throughput (iperf3, one stream) and single-thread memcpy
(mccl-reduce-bench). The table shows, per (op, size), the median over the
rounds of each variant's p50 and busbw, and those ratios.

Outputs go to --out (default out/compare/): rows.jsonl (every row of every
run; "label" names the variant, e.g. mccl, mccl-tcp, gloo:ring, mpi:sm, and
"env" the variables compare.py set for it), table.md (the side-by-side
table), limits.json, and plot.png when matplotlib is installed (Debian
python3-matplotlib).
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GLOO_ALGOS = {"allreduce": ["ring", "ring_chunked", "halving_doubling", "default"],
              "broadcast": [None], "allgather": [None], "reduce_scatter": [None],
              "alltoall": [None], "barrier": [None]}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, timeout, env=None):
    """Runs cmd, with env added to this process's environment; returns (rc, output).
    Never raises on failure or timeout."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, cwd=REPO, env={**os.environ, **env} if env else None)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\n(timed out after {timeout} s)"


def read_rows(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    rows.append(json.loads(line))
    return rows


def mccl_variants(args):
    """(label, environment) of each mccl run. MCCL_TRANSPORT is set even for the
    default variant: one inherited from the caller's shell would otherwise make
    "mccl" measure something other than its label says."""
    variants = [("mccl", {"MCCL_TRANSPORT": "auto"})]
    if not args.no_mccl_tcp:
        variants.append(("mccl-tcp", {"MCCL_TRANSPORT": "tcp"}))
    return variants


def bench_runs(args, build, op):
    """(label, command builder, environment) for every library variant of one op."""
    mcclrun = [sys.executable, os.path.join(REPO, "tools", "mcclrun"), "-n", str(args.ranks),
               "--timeout", str(args.timeout), "--"]
    sizes = ["-b", args.min, "-e", args.max, "-f", str(args.factor)]
    iters = ["-n", str(args.iters)] if args.iters else []
    # mcclrun hands its environment to the ranks, so MCCL_TRANSPORT reaches them.
    runs = [(label, lambda out: mcclrun + [os.path.join(build, "bench", "mccl-bench"), "-o", op]
             + sizes + iters + ["--json", out], env) for label, env in mccl_variants(args)]
    gloo = os.path.join(build, "bench", "gloo-bench")
    if os.path.exists(gloo) and op in GLOO_ALGOS:
        for algo in GLOO_ALGOS[op]:
            extra = ["-a", algo] if algo else []
            runs.append((f"gloo:{algo or 'default'}",
                         lambda out, extra=extra: mcclrun + [gloo, "-o", op] + extra + sizes + iters
                         + ["--json", out], None))
    mpi = os.path.join(build, "bench", "mpi-bench")
    if os.path.exists(mpi):
        for variant in ("tcp", "sm"):
            runs.append((f"mpi:{variant}",
                         lambda out, variant=variant: ["bash", os.path.join(REPO, "bench", "run_mpi_bench.sh"),
                                                       str(args.ranks), variant, "-o", op] + sizes + iters
                         + ["--json", out], None))
    return runs


def missing_peers(build):
    """One line per peer benchmark that is not built: bench_runs leaves it out,
    and the table would otherwise show its columns empty without saying why."""
    why = []
    if not os.path.exists(os.path.join(build, "bench", "gloo-bench")):
        why.append("gloo-bench is not built (Debian libgloo-dev): no Gloo columns")
    if not os.path.exists(os.path.join(build, "bench", "mpi-bench")):
        why.append("mpi-bench is not built (Debian libopenmpi-dev openmpi-bin): no Open MPI columns")
    return why


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure_iperf(seconds=3):
    if not shutil.which("iperf3"):
        return None, "iperf3 not installed (Debian iperf3)"
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        rc, out = run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"],
                      seconds + 20)
        if rc != 0:
            return None, out[-300:]
        bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
        return bps / 8 / 1e9, None
    finally:
        server.kill()
        server.wait()


def measure_memcpy(build):
    exe = os.path.join(build, "bench", "mccl-reduce-bench")
    if not os.path.exists(exe):
        return None
    rc, out = run([exe, "--benchmark_filter=memcpy/64MiB", "--benchmark_repetitions=3",
                   "--benchmark_report_aggregates_only=true"], 300)
    m = re.search(r"memcpy/64MiB\s+([\d.]+) GB/s", out)
    return float(m.group(1)) if m else None


def median(xs):
    return statistics.median(xs) if xs else None


def fmt_us(x):
    if x is None:
        return "–"
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.1f} µs"


def fmt_ratio(x):
    return "–" if x is None else f"{x:.2f}×"


def size_label(b):
    for unit, n in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n}{unit}"
    return str(b)


def ratio(a, b):
    return a / b if a and b else None


def build_table(rows, ranks, limits):
    """Side-by-side markdown table: medians over rounds. Each mccl variant is set
    against the peer on the same medium, so neither comparison mixes shared
    memory with TCP."""
    by = {}
    for r in rows:
        if r.get("check") == "WRONG":
            continue
        key = (r["op"], r["bytes"], r["label"])
        by.setdefault(key, []).append(r)
    ops = sorted({r["op"] for r in rows})
    lines = [f"{ranks} ranks on one host. Medians over rounds of each variant's p50; busbw in GB/s. "
             "busbw ratios above 1 and p50 ratios below 1 favour mccl.",
             "",
             "- Shared memory: mccl (MCCL_TRANSPORT=auto, shared memory between the ranks of one host) "
             "against Open MPI sm (vader BTL): busbw mccl ÷ MPI sm, p50 mccl ÷ MPI sm.",
             "- TCP over loopback: mccl-tcp (MCCL_TRANSPORT=tcp) against the best TCP peer = the faster "
             "of Gloo's best algorithm and Open MPI over TCP: busbw mccl-tcp ÷ best TCP peer, "
             "p50 mccl-tcp ÷ MPI TCP, p50 mccl-tcp ÷ Gloo.",
             ""]
    if limits.get("iperf3_gbs"):
        lines.append(f"Limits measured in this run: loopback TCP (iperf3, one stream) "
                     f"{limits['iperf3_gbs']:.2f} GB/s; memcpy (one thread, 64 MiB) "
                     f"{limits.get('memcpy_gbs') or 0:.2f} GB/s.")
        lines.append("")
    for op in ops:
        lines.append(f"### {op}")
        lines.append("")
        lines.append("| size | mccl p50 (busbw) | Open MPI sm p50 (busbw) | busbw mccl ÷ MPI sm | "
                     "p50 mccl ÷ MPI sm | mccl-tcp p50 (busbw) | best Gloo p50 (busbw) | "
                     "Open MPI TCP p50 (busbw) | busbw mccl-tcp ÷ best TCP peer | p50 mccl-tcp ÷ MPI TCP | "
                     "p50 mccl-tcp ÷ Gloo |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
        sizes = sorted({b for (o, b, _) in by if o == op})
        for b in sizes:
            def stat(label):
                rs = by.get((op, b, label), [])
                return median([r["p50_us"] for r in rs]), median([r["busbw_gbs"] for r in rs])
            mccl = stat("mccl")
            mpi_sm = stat("mpi:sm")
            mccl_tcp = stat("mccl-tcp")
            gloos = [(lbl, stat(lbl)) for (o, bb, lbl) in by if o == op and bb == b and lbl.startswith("gloo")]
            gloo_best = min(gloos, key=lambda g: g[1][0]) if gloos else (None, (None, None))
            mpi_tcp = stat("mpi:tcp")
            peers = [p for p in (gloo_best[1], mpi_tcp) if p[0] is not None]
            best_bw = max((p[1] for p in peers), default=None)

            def cell(s, name=""):
                if s[0] is None:
                    return "–"
                bw = f" ({s[1]:.2f})" if s[1] else ""
                return f"{fmt_us(s[0])}{bw}{name}"
            gname = f" [{gloo_best[0].split(':')[1]}]" if gloo_best[0] else ""
            lines.append(f"| {size_label(b)} | {cell(mccl)} | {cell(mpi_sm)} | "
                         f"{fmt_ratio(ratio(mccl[1], mpi_sm[1]))} | {fmt_ratio(ratio(mccl[0], mpi_sm[0]))} | "
                         f"{cell(mccl_tcp)} | {cell(gloo_best[1], gname)} | {cell(mpi_tcp)} | "
                         f"{fmt_ratio(ratio(mccl_tcp[1], best_bw))} | "
                         f"{fmt_ratio(ratio(mccl_tcp[0], mpi_tcp[0]))} | "
                         f"{fmt_ratio(ratio(mccl_tcp[0], gloo_best[1][0]))} |")
        lines.append("")
    return "\n".join(lines)


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: apt-get install python3-matplotlib for plot.png"
    ops = sorted({r["op"] for r in rows})
    fig, axes = plt.subplots(len(ops), 2, figsize=(12, 4 * len(ops)), squeeze=False)
    for i, op in enumerate(ops):
        labels = sorted({r["label"] for r in rows if r["op"] == op})
        for label in labels:
            pts = {}
            for r in rows:
                if r["op"] == op and r["label"] == label:
                    pts.setdefault(r["bytes"], []).append(r)
            xs = sorted(pts)
            axes[i][0].plot(xs, [median([r["busbw_gbs"] for r in pts[x]]) for x in xs], marker="o", label=label)
            axes[i][1].plot(xs, [median([r["p50_us"] for r in pts[x]]) for x in xs], marker="o", label=label)
        for j, (title, unit) in enumerate((("busbw", "GB/s"), ("p50 latency", "µs"))):
            ax = axes[i][j]
            ax.set_xscale("log", base=2)
            if j == 1:
                ax.set_yscale("log")
            ax.set_title(f"{op}: {title}")
            ax.set_xlabel("bytes")
            ax.set_ylabel(unit)
            ax.legend(fontsize=7)
            ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--ranks", type=int, default=2)
    ap.add_argument("--ops", default="allreduce")
    ap.add_argument("-b", "--min", default="4")
    ap.add_argument("-e", "--max", default="64M")
    ap.add_argument("-f", "--factor", type=int, default=4)
    ap.add_argument("--iters", type=int, default=0, help="timed iterations per size (0: each bench's default)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-mccl-tcp", action="store_true",
                    help="skip mccl-tcp (MCCL_TRANSPORT=tcp); the TCP comparison columns stay empty")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per benchmark run")
    ap.add_argument("--build", default=os.environ.get("MCCL_BUILD_DIR", os.path.join(REPO, "build")))
    ap.add_argument("--out", default=os.path.join(REPO, "out", "compare"))
    args = ap.parse_args()
    # This script's, not mccl's: the ranks, which inherit this environment,
    # would refuse an MCCL_ variable they do not know.
    os.environ.pop("MCCL_BUILD_DIR", None)
    os.makedirs(args.out, exist_ok=True)
    if not os.path.exists(os.path.join(args.build, "bench", "mccl-bench")):
        sys.exit(f"compare.py: {args.build}/bench/mccl-bench is missing; run tools/dev.sh demo or build first")

    limits = {"ranks": args.ranks, "cores": os.cpu_count()}
    limits["iperf3_gbs"], why = measure_iperf()
    if why:
        log(f"# iperf3: {why}")
    limits["memcpy_gbs"] = measure_memcpy(args.build)
    log(f"# limits: {limits}")
    for why in missing_peers(args.build):
        log(f"# {why}")

    rows = []
    failures = []
    tmp = tempfile.mkdtemp(prefix="mccl-compare.")
    try:
        for rnd in range(args.rounds):
            for op in args.ops.split(","):
                runs = bench_runs(args, args.build, op)
                # Rotate the order every round: nobody always goes first.
                k = rnd % len(runs)
                for label, make, env in runs[k:] + runs[:k]:
                    out = os.path.join(tmp, f"{rnd}-{op}-{label.replace(':', '_')}.jsonl")
                    log(f"# round {rnd + 1}/{args.rounds}: {op} {label}")
                    rc, text = run(make(out), args.timeout + 30, env)
                    got = read_rows(out)
                    if rc != 0:
                        failures.append(f"{op} {label} round {rnd + 1}: exit {rc}: {text[-400:]}")
                        log(f"#   failed (exit {rc}); rows kept: {len(got)}")
                    for r in got:
                        r["label"] = label
                        r["round"] = rnd
                        if env:
                            r["env"] = env
                        rows.append(r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    with open(os.path.join(args.out, "rows.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(args.out, "limits.json"), "w") as f:
        json.dump(limits, f, indent=2)
    table = build_table(rows, args.ranks, limits)
    command = "python3 bench/compare.py " + " ".join(sys.argv[1:])
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(f"Command: `{command}`\n\n{table}\n")
    why = plot(rows, os.path.join(args.out, "plot.png"))
    print(table)
    if why:
        log(f"# {why}")
    wrong = [r for r in rows if r.get("check") == "WRONG"]
    for fmsg in failures:
        log(f"# FAILED: {fmsg}")
    if wrong:
        log(f"# {len(wrong)} row(s) with wrong results (left out of the table)")
    return 1 if failures or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
