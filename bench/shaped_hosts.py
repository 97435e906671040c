#!/usr/bin/env python3
"""mccl-bench across emulated hosts on shaped links: busbw as a fraction of
the shaped rate.

    sudo "$(command -v python3)" bench/shaped_hosts.py [--hosts 3] [--ranks-per-host 1] [--rate 1gbit]
         [--shaper htb] [--networks 1] [--ops allreduce,allgather,broadcast] [-b 1M] [-e 64M]
         [--rounds 3] [--env K=V ...] [--variant 'NAME|K=V|K=V' ...]

Builds --hosts network namespaces joined by a bridge per network (see
tests/multihost/netns_hosts.py), every host link limited to --rate in both
directions, starts --ranks-per-host ranks per host over ssh with mcclrun
(ranks 0..K-1 on the first host, and so on; the ranks of one host share
memory), and prints per op and size the median busbw of --rounds runs and
busbw / rate.  With
--networks 2 each host has two addresses (two shaped links) and the hostfile
lists both.  Needs root.  Everything is removed afterwards.

Each --variant is a named set of extra settings, e.g.
--variant '2 sockets|MCCL_SOCKETS_PER_PEER=2' or
--variant 'bidir|MCCL_ALGO=allreduce=bidir_ring;allgather=bidir_ring';
items starting with '-' are extra mccl-bench arguments, e.g.
--variant 'topk|MCCL_COMPRESSION=topk|--no-check' (top-k results differ
from the exact sum by design).
Variants run in turn within every round on the same emulated hosts (so
drifting machine load hits them alike), and a last table gives each
variant's median busbw relative to the first one's.
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "multihost"))
import netns_hosts  # noqa: E402

UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def rate_bytes_per_s(text):
    for unit, scale in UNITS.items():
        if text.endswith(unit):
            return float(text[:-len(unit)]) * scale / 8
    raise SystemExit(f"--rate: expected e.g. 1gbit or 500mbit, got {text!r}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=3)
    p.add_argument("--ranks-per-host", type=int, default=1)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--shaper", default="htb", choices=("htb", "tbf"))
    p.add_argument("--networks", type=int, default=1)
    p.add_argument("--ops", default="allreduce,allgather,broadcast")
    p.add_argument("-b", default="1M")
    p.add_argument("-e", default="64M")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--variant", action="append", default=[],
                   help="NAME|K=V|K=V: extra settings of one variant (default: one, unnamed)")
    p.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "mccl-bench"))
    opts = p.parse_args()
    rate = rate_bytes_per_s(opts.rate)
    why = netns_hosts.missing_requirements()
    if why:
        raise SystemExit(f"shaped_hosts: {why}")
    variants = [parse_variant(v) for v in opts.variant] or [("defaults", [], [])]
    results = {}
    with netns_hosts.EmulatedHosts(count=opts.hosts, networks=opts.networks, rate=opts.rate,
                                   shaper=opts.shaper) as hosts:
        hostfile = os.path.join(hosts.workdir, "hosts.json")
        with open(hostfile, "w") as f:
            json.dump(hosts.hostfile(slots=opts.ranks_per_host), f)
        for rnd in range(opts.rounds):
            for name, env, bench_args in variants:
                for op in opts.ops.split(","):
                    argv = [sys.executable, os.path.join(ROOT, "tools", "mcclrun"), "--ssh",
                            hosts.ssh_command, "--hostfile", hostfile, "--timeout", "500",
                            "--no-prefix"]
                    for kv in opts.env + env:
                        argv += ["--env", kv]
                    argv += ["--", os.path.abspath(opts.bench), "-o", op, "-b", opts.b, "-e", opts.e,
                             "-f", "4", "--json", "-"] + bench_args
                    done = hosts.run(0, argv, timeout=560, check=False)
                    if done.returncode != 0:
                        raise SystemExit(f"{name}: {op} round {rnd} failed:\n{done.stdout}\n{done.stderr}")
                    for line in done.stdout.splitlines():
                        if line.startswith("{"):
                            row = json.loads(line)
                            results.setdefault((name, op, row["bytes"]), []).append(row)
    print(f"# {opts.hosts} hosts x {opts.ranks_per_host} rank(s), {opts.networks} network(s), {opts.shaper} "
          f"{opts.rate} per host link and direction ({rate / 1e6:.1f} MB/s), "
          f"median of {opts.rounds}; env: {' '.join(opts.env) or 'defaults'}")
    for name, env, bench_args in variants:
        print(f"\n## {name}: {' '.join(env + bench_args) or 'no extra settings'}\n")
        print("| op | bytes | algorithm | p50 | busbw (MB/s) | busbw / rate | check |")
        print("|---|---|---|---|---|---|---|")
        for (variant, op, size), rows in sorted(results.items()):
            if variant != name:
                continue
            busbw = median_busbw(rows)
            p50 = statistics.median(r["p50_us"] for r in rows)
            checks = ("ok" if all(r["check"] == "ok" for r in rows)
                      else "not checked" if all(r["check"] == "skipped" for r in rows) else "WRONG")
            print(f"| {op} | {size} | {rows[0]['algorithm']} | {p50 / 1000:.1f} ms | "
                  f"{busbw / 1e6:.1f} ({' '.join(format(r['busbw_gbs'] * 1e3, '.1f') for r in rows)}) | "
                  f"{busbw / rate:.0%} | {checks} |")
    if len(variants) > 1:
        first = variants[0][0]
        print(f"\n## busbw relative to {first}\n")
        print("| op | bytes | " + " | ".join(name for name, _, _ in variants) + " |")
        print("|---|---|" + "---|" * len(variants))
        for op, size in sorted({(op, size) for _, op, size in results}):
            base = median_busbw(results[(first, op, size)])
            cells = [f"{median_busbw(results[(name, op, size)]) / base:.2f}"
                     if (name, op, size) in results else "-" for name, _, _ in variants]
            print(f"| {op} | {size} | " + " | ".join(cells) + " |")


def parse_variant(text):
    """(name, K=V settings, extra mccl-bench arguments)."""
    name, *items = text.split("|")
    env = [kv for kv in items if not kv.startswith("-")]
    bench_args = [a for a in items if a.startswith("-")]
    for kv in env:
        if "=" not in kv:
            raise SystemExit(f"--variant {text!r}: {kv!r} is not K=V (or a -bench argument)")
    return name, env, bench_args


def median_busbw(rows):
    """Median busbw of a cell's rounds, in bytes per second."""
    return statistics.median(r["busbw_gbs"] for r in rows) * 1e9


if __name__ == "__main__":
    main()
