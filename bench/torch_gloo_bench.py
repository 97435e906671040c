#!/usr/bin/env python3
"""torch-gloo-bench: float32 sum allreduce through torch.distributed's "gloo"
backend (or mccl's, --backend mccl: what a DDP bucket costs through torch),
measured and printed the way mccl-bench and mpi-bench do, so one parser
(bench/scaling_table.py, bench/device_table.py) reads all three.

    python3 tools/mcclrun -n 2 -- python3 bench/torch_gloo_bench.py -b 4 -e 64K -f 16 -n 3
    # on the 16-core machine (torch 2.x): run by bench/scaling_rounds.sh

Ranks come from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (env:// init, as
mcclrun and torchrun set them). With MASTER_ADDR on loopback and no
GLOO_SOCKET_IFNAME set, gloo is told to use "lo" (so every byte goes over
loopback TCP, as for Open MPI's tcp variant and MCCL_TRANSPORT=tcp).

Options (a subset of mccl-bench's, same meaning):
  -b, -e, -f   sizes in bytes with K/M/G suffixes (default -b 4 -e 64M -f 4); the
               size is the whole buffer (nccl-tests' convention); a size rounds down
               to whole float32 elements (at least one), sizes that round to one
               already measured are dropped, as in mccl-bench
  -n ITERS     timed iterations per size (default by size: 200 up to 64 KiB, 50 up to
               1 MiB, 10 up to 16 MiB, 5 above, as bench/bench_common.hpp)
  -w WARMUP    warm-up iterations per size (default max(2, ITERS/10))
  -o allreduce, -d float32   accepted for symmetry; nothing else is supported
  --check / --no-check       compare every element of every iteration with the
               locally computed reference (default: check)
  --threads T  torch.set_num_threads(T) (default 1: the reduction runs in gloo's own
               thread; this keeps 16 ranks on 16 cores from spawning 16x16 threads)

Measurement, as mccl-bench: every iteration copies the same inputs into the
buffer, runs a barrier (dist.barrier), then times one synchronous
dist.all_reduce (steady clock, us). Per iteration the slowest rank's time
counts (a MAX allreduce over the times at the end of each size); the table
shows its p50 and p99 (nearest rank), algbw = bytes / p50 (GB/s = 1e9 B/s) and
busbw = algbw * 2(n-1)/n. Inputs: element j of rank r holds (r+1)*(j%7+1), so
the sum is exact in float32 and known locally.

Output (rank 0, stdout), the columns of mccl-bench:
  # torch-gloo-bench: allreduce, dtype float32, redop sum, in place, N rank(s), torch V, backend gloo
  #        bytes        count    p50(us)    p99(us)  algbw(GB/s)  busbw(GB/s)  check  algorithm
               4            1      123.4      456.7        0.000        0.000     ok  gloo
"""
import argparse
import datetime
import math
import os
import sys
import time


def parse_byte_size(text):
    """'4', '64K', '1M', '2G' (binary, optional B / iB), as bench_common.hpp."""
    t = text.strip()
    i = 0
    while i < len(t) and t[i].isdigit():
        i += 1
    if i == 0:
        raise argparse.ArgumentTypeError(f"expects a byte size such as 4, 64K or 16M, got \"{text}\"")
    value = int(t[:i])
    mult = 1
    rest = t[i:]
    if rest[:1].upper() in ("K", "M", "G"):
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[rest[0].upper()]
        rest = rest[1:]
    if rest.upper() not in ("", "B") and not (mult != 1 and rest.upper() == "IB"):
        raise argparse.ArgumentTypeError(f"expects a byte size such as 4, 64K or 16M, got \"{text}\"")
    if value * mult == 0:
        raise argparse.ArgumentTypeError("a size must be at least 1 byte")
    return value * mult


def parse_count(text):
    try:
        v = int(text)
    except ValueError:
        v = -1
    if not 0 <= v <= 1000000:
        raise argparse.ArgumentTypeError(f"expects a count, got \"{text}\"")
    return v


def default_iters(nbytes):
    if nbytes <= 64 << 10:
        return 200
    if nbytes <= 1 << 20:
        return 50
    if nbytes <= 16 << 20:
        return 10
    return 5


def percentile(values, p):
    """Nearest rank, as bench::percentile."""
    if not values:
        return 0.0
    v = sorted(values)
    idx = math.ceil(p / 100.0 * len(v))
    return v[min(len(v) - 1, max(idx, 1) - 1)]


def sweep_sizes(lo, hi, factor, elem=4):
    sizes, last, size = [], 0, lo
    while size <= hi:
        b = max(1, size // elem) * elem
        if b != last:
            sizes.append(size)
        last = b
        if size > hi // factor:
            break
        size *= factor
    return sizes


def main():
    ap = argparse.ArgumentParser(prog="torch-gloo-bench", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--op", default="allreduce", choices=["allreduce"])
    ap.add_argument("-d", "--dtype", default="float32", choices=["float32"])
    ap.add_argument("-b", dest="min_bytes", type=parse_byte_size, default=4)
    ap.add_argument("-e", dest="max_bytes", type=parse_byte_size, default=64 << 20)
    ap.add_argument("-f", dest="factor", type=int, default=4)
    ap.add_argument("-n", dest="iters", type=parse_count, default=0)
    ap.add_argument("-w", dest="warmup", type=parse_count, default=-1)
    ap.add_argument("--check", dest="check", action="store_true", default=True)
    ap.add_argument("--no-check", dest="check", action="store_false")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--backend", default="gloo", choices=["gloo", "mccl"],
                    help="the torch.distributed backend measured (default gloo; mccl: the same "
                         "calls through mccl's backend, as DDP makes them)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="seconds gloo waits for a peer before failing (default 600)")
    o = ap.parse_args()
    if o.factor < 2:
        ap.error("-f must be at least 2")
    if o.min_bytes > o.max_bytes:
        ap.error("-b must not exceed -e")
    if o.iters == 0 and "-n" in sys.argv[1:]:
        ap.error("-n must be at least 1")

    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if k not in os.environ:
            sys.exit(f"torch-gloo-bench: {k} is not set: start the ranks with tools/mcclrun or torchrun")
    if "GLOO_SOCKET_IFNAME" not in os.environ and os.environ["MASTER_ADDR"] in ("127.0.0.1", "localhost", "::1"):
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"

    import torch
    import torch.distributed as dist

    torch.set_num_threads(max(1, o.threads))
    if o.backend == "mccl":
        import mccl  # noqa: F401  (registers the backend)
    dist.init_process_group(o.backend, init_method="env://",
                            timeout=datetime.timedelta(seconds=o.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    busfactor = 2.0 * (world - 1) / world if world > 1 else 0.0
    if rank == 0:
        print(f"# torch-gloo-bench: allreduce, dtype float32, redop sum, in place, {world} rank(s), "
              f"torch {torch.__version__}, backend {o.backend}", flush=True)
        print("# %12s %12s %10s %10s %12s %12s %6s  %s" % ("bytes", "count", "p50(us)", "p99(us)",
              "algbw(GB/s)", "busbw(GB/s)", "check", "algorithm"), flush=True)
    all_ok = True
    pattern = torch.arange(7, dtype=torch.float32) + 1  # j % 7 + 1
    for size in sweep_sizes(o.min_bytes, o.max_bytes, o.factor):
        count = max(1, size // 4)
        nbytes = count * 4
        reps = (count + 6) // 7
        base = pattern.repeat(reps)[:count].contiguous()
        init = base * float(rank + 1)
        expected = base * float(world * (world + 1) // 2) if o.check else None
        buf = torch.empty_like(init)
        iters = o.iters if o.iters > 0 else default_iters(nbytes)
        warmup = o.warmup if o.warmup >= 0 else max(2, iters // 10)
        times, bad = [], 0
        for it in range(warmup + iters):
            buf.copy_(init)
            dist.barrier()
            t0 = time.perf_counter_ns()
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
            t1 = time.perf_counter_ns()
            if it >= warmup:
                times.append((t1 - t0) / 1e3)
                if o.check and not torch.equal(buf, expected):
                    bad += 1
        # the slowest rank defines each iteration's time; a wrong element anywhere fails the size
        t = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        b = torch.tensor([bad], dtype=torch.int64)
        dist.all_reduce(b, op=dist.ReduceOp.MAX)
        bad = int(b.item())
        all_ok = all_ok and bad == 0
        if rank == 0:
            ts = t.tolist()
            p50, p99 = percentile(ts, 50), percentile(ts, 99)
            algbw = nbytes / (p50 * 1e-6) / 1e9 if p50 > 0 else 0.0
            print("  %12d %12d %10.1f %10.1f %12.3f %12.3f %6s  %s" % (
                nbytes, count, p50, p99, algbw, algbw * busfactor,
                "-" if not o.check else ("WRONG" if bad else "ok"), o.backend), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if not all_ok:
        if rank == 0:
            print("torch-gloo-bench: some results were WRONG", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
