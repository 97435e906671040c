#!/usr/bin/env python3
"""Train a conv + attention model with DistributedDataParallel on synthetic
data, over backend mccl or gloo, and report samples/s.

    # two ranks through mcclrun (or torchrun: RANK/WORLD_SIZE/MASTER_* env)
    PYTHONPATH=build/python tools/mcclrun -n 2 python3 examples/ddp_dummy_train.py --backend mccl
    # the same with torch.multiprocessing.spawn
    PYTHONPATH=build/python python3 examples/ddp_dummy_train.py --spawn 2 --backend gloo
    # one process, no process group: the baseline
    python3 examples/ddp_dummy_train.py --baseline

The default model (--width 1000 --depth 8) has about 96M parameters. Every
rank draws the same global batch from a generator seeded by --seed and the
step number and trains on its slice of it, so a run's result depends on the
seed and the global batch, not on the number of ranks. --save-stats writes
samples/s, per-step times and losses as JSON (rank 0).
"""

import argparse
import datetime
import json
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class ConvAttentionBlock(nn.Module):
    """A depthwise 3x3 convolution over the token grid, then self-attention
    and an MLP (pre-norm residuals): about 12 * width^2 parameters."""

    def __init__(self, width, heads, grid):
        super().__init__()
        self.grid = grid
        self.conv = nn.Conv2d(width, width, 3, padding=1, groups=width)
        self.norm1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        b, n, c = x.shape
        img = x.transpose(1, 2).reshape(b, c, self.grid, self.grid)
        x = x + F.gelu(self.conv(img)).reshape(b, c, n).transpose(1, 2)
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class ConvAttentionNet(nn.Module):
    def __init__(self, width=1000, depth=8, heads=8, image=16, patch=4, classes=100):
        super().__init__()
        grid = image // patch
        self.stem = nn.Conv2d(3, width, patch, stride=patch)
        self.pos = nn.Parameter(torch.zeros(1, grid * grid, width))
        self.blocks = nn.ModuleList(ConvAttentionBlock(width, heads, grid) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, images):
        x = self.stem(images).flatten(2).transpose(1, 2) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(1))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["mccl", "gloo"], default="mccl")
    p.add_argument("--baseline", action="store_true", help="one process, no process group, no DDP")
    p.add_argument("--spawn", type=int, metavar="N", help="start N local ranks with torch.multiprocessing.spawn")
    p.add_argument("--steps", type=int, default=20, help="timed training steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before them")
    p.add_argument("--batch", type=int, default=8, help="global batch (split across ranks)")
    p.add_argument("--width", type=int, default=1000)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--image", type=int, default=16, help="image side in pixels (patch 4)")
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's choice)")
    p.add_argument("--mkldnn", action="store_true", help="let convolutions use oneDNN (see train())")
    p.add_argument("--no-comm", action="store_true",
                   help="DDP with a communication hook that hands each gradient bucket back "
                        "unreduced: the step without the gradient exchange, which no backend can beat "
                        "(the ranks' models then drift apart; for timing only)")
    p.add_argument("--save-stats", metavar="FILE.json")
    p.add_argument("--label", help="name of this run in the stats (default: backend or baseline)")
    return p.parse_args(argv)


def build_model(args):
    torch.manual_seed(args.seed)  # identical initial parameters on every rank
    return ConvAttentionNet(args.width, args.depth, args.heads, args.image, 4, args.classes)


def global_batch(args, step):
    g = torch.Generator().manual_seed(args.seed * 100003 + step)
    images = torch.randn(args.batch, 3, args.image, args.image, generator=g)
    labels = torch.randint(0, args.classes, (args.batch,), generator=g)
    return images, labels


def unreduced_bucket(state, bucket):
    """A DDP communication hook that communicates nothing (--no-comm)."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def train(args, rank=0, world=1):
    """Runs warmup + timed steps; returns (stats, model). With world > 1 the
    process group must already be initialised."""
    if args.threads:
        torch.set_num_threads(args.threads)
    # Debian's torch 1.13 runs CPU convolutions through oneDNN, whose results
    # here were not reproducible: two identical single-process runs of this
    # model diverged at step 2 and then went NaN. torch's native convolution
    # is deterministic, so use it unless asked otherwise.
    torch.backends.mkldnn.enabled = args.mkldnn
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} is not divisible by the {world} ranks")
    model = build_model(args)
    params = sum(p.numel() for p in model.parameters())
    net = model if world == 1 and args.baseline else nn.parallel.DistributedDataParallel(model)
    if args.no_comm and net is not model:
        net.register_comm_hook(None, unreduced_bucket)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    per_rank = args.batch // world
    step_times, losses = [], []
    for step in range(args.warmup + args.steps):
        images, labels = global_batch(args, step)
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(images[mine]), labels[mine])
        loss.backward()
        opt.step()
        elapsed = time.perf_counter() - start
        if step >= args.warmup:
            step_times.append(elapsed)
            losses.append(loss.item())
    total = sum(step_times)
    stats = {
        "label": args.label or ("baseline" if args.baseline else "no-comm" if args.no_comm else args.backend),
        "backend": None if args.baseline else args.backend,
        "world_size": world,
        "global_batch": args.batch,
        "parameters": params,
        "steps": args.steps,
        "samples_per_s": args.batch * args.steps / total if total > 0 else 0.0,
        "step_times_s": step_times,
        "loss": losses,
        "model": {"width": args.width, "depth": args.depth, "heads": args.heads, "image": args.image},
    }
    return stats, model


def run_rank(rank, world, args, init_method):
    if not args.baseline:
        if args.backend == "mccl":
            import mccl  # noqa: F401  (registers the backend)
        dist.init_process_group(args.backend, init_method=init_method, rank=rank, world_size=world,
                                timeout=datetime.timedelta(minutes=5))
    stats, _ = train(args, rank, world)
    if rank == 0:
        print(f"{stats['label']}: {world} rank(s), {stats['parameters'] / 1e6:.1f}M parameters, "
              f"global batch {args.batch}: {stats['samples_per_s']:.2f} samples/s, "
              f"median step {sorted(stats['step_times_s'])[len(stats['step_times_s']) // 2] * 1000:.0f} ms, "
              f"final loss {stats['loss'][-1]:.4f}", flush=True)
        if args.save_stats:
            with open(args.save_stats, "w") as f:
                json.dump(stats, f, indent=1)
    if not args.baseline:
        dist.destroy_process_group()


def main(argv=None):
    args = parse_args(argv)
    if args.baseline:
        run_rank(0, 1, args, None)
    elif args.spawn:
        import torch.multiprocessing as mp
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(run_rank, args=(args.spawn, args, "file://" + os.path.join(d, "store")),
                     nprocs=args.spawn, join=True)
    else:
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            sys.exit("set RANK and WORLD_SIZE (mcclrun and torchrun do), or pass --spawn N or --baseline")
        run_rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, "env://")


if __name__ == "__main__":
    main()
