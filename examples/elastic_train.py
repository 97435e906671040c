#!/usr/bin/env python3
"""Training that survives a lost rank, with mccl.distributed.

N ranks (processes) train a linear model by data parallelism: each step they
sum their shares of one global batch's gradient with all_sum. At a random
step one rank is SIGKILLed. The survivors' all_sum fails, and the group is
revoked on every one of them by then (the lost rank's link made each rank's
supervisor revoke it); they learn from the coordinator which rank is gone,
shrink without it and redo the step. A few
steps later a replacement process joins by grow and receives the model by
broadcast. Every step uses the same global batch whatever the group's size,
so the loss curve must match an uninterrupted single-process run's.

This script is the coordinator, as a launcher's agent would be: it starts
the ranks, sees the one that died, tells the survivors, starts the
replacement when they hand out the grow handle, and checks the losses. Its
last line is

    recovery_s=<kill to the next completed step> join_s=<join call to the first step with the replacement> loss_ok=<0|1>

Run it from a build (docs/mlx.md, "Elastic training"):

    PYTHONPATH=build/python python3 examples/elastic_train.py --ranks 8
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time

DIM = 64            # model size
ROWS = 4096         # dataset rows
BATCH = 512         # global batch, split among the ranks of the group
LR = 0.5 / BATCH


# ---- the model and its data (every process makes the same) -------------------------

def dataset(np):
    rng = np.random.default_rng(1234)
    x = rng.standard_normal((ROWS, DIM))
    y = x @ rng.standard_normal(DIM) + 0.1 * rng.standard_normal(ROWS)
    return x, y


def share(np, x, y, w, step, rank, size):
    """This rank's part of step `step`'s batch: gradient sum, loss sum, rows."""
    rows = (step * BATCH + np.arange(BATCH)) % ROWS
    mine = rows[rank::size]
    residual = x[mine] @ w - y[mine]
    return x[mine].T @ residual, 0.5 * float(residual @ residual), float(len(mine))


def reference_losses(steps):
    """The losses of the same training in one process, without interruption."""
    import numpy as np
    x, y = dataset(np)
    w = np.zeros(DIM)
    losses = []
    for step in range(steps):
        g, loss, rows = share(np, x, y, w, step, 0, 1)
        losses.append(loss / rows)
        w -= LR * g
    return losses


# ---- a rank ----------------------------------------------------------------------------

def publish(directory, name, text):
    tmp = os.path.join(directory, name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(directory, name))


def wait_for(directory, name, limit):
    path = os.path.join(directory, name)
    end = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise TimeoutError(f"{name} did not appear within {limit} s")
        time.sleep(0.002)
    with open(path) as f:
        return f.read()


def rank_main(opts):
    import numpy as np
    import mccl.distributed as md
    from mccl.errors import MCCLError

    d = opts.dir
    x, y = dataset(np)
    w = np.zeros(DIM)
    step = 0
    if opts.join:
        # The replacement: join the grown group, then take the model and
        # the step from its rank 0.
        handle = wait_for(d, "grow_handle", 30)
        joining = time.time()
        group = md.join(handle)
        state = md.broadcast(np.zeros(DIM + 1), root=0, group=group)
        w, step = state[:DIM].copy(), int(state[DIM])
    else:
        group = md.init()
    w_before = w.copy()  # the model before the last step: a rank that completed a
    #                      step its peers failed goes back to it
    recovered_at = None
    grow_at = None       # the step after which the survivors grow
    while step < opts.steps:
        if opts.kill_at == step and not opts.join and group.rank() == opts.victim and not recovered_at:
            publish(d, "killed_at", repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)
        g, loss, rows = share(np, x, y, w, step, group.rank(), group.size())
        try:
            total = md.all_sum(np.concatenate([g, [loss, rows]]), group=group)
        except MCCLError as e:
            group, step, w = recover(md, np, group, step, w, w_before, d, e)
            if recovered_at is None:
                recovered_at = "pending"
            continue
        w_before = w.copy()
        w -= LR * total[:DIM]
        if group.rank() == 0:
            with open(os.path.join(d, "losses"), "a") as f:
                f.write(f"{step} {float(total[DIM] / total[DIM + 1])!r}\n")
        step += 1
        if recovered_at == "pending":
            recovered_at = time.time()
            grow_at = step + opts.join_after  # alike on every survivor
            if group.rank() == 0:
                publish(d, "recovered_at", repr(recovered_at))
        if opts.join and not os.path.exists(os.path.join(d, f"joined_{os.getpid()}")):
            publish(d, f"joined_{os.getpid()}", repr(time.time() - joining))
        if step == grow_at:
            # Rank 0 hands out the handle; every survivor grows with it and
            # waits there until the replacement, which the coordinator
            # starts on seeing the handle, has joined.
            if group.rank() == 0:
                publish(d, "grow_handle", group.grow_handle(group.size() + 1))
            group = group.grow(wait_for(d, "grow_handle", 30))
            md.broadcast(np.concatenate([w, [step]]), root=0, group=group)
    md.barrier(group=group)


def recover(md, np, group, step, w, w_before, d, error):
    """After a failed step: shrink without the ranks the coordinator says are
    gone, and agree on the step to go on from. The lost rank revoked the
    group on every rank already (its link's supervisor did, before the
    step's op raised here): no revoke() first."""
    if not group.revoked():
        raise RuntimeError(f"the failed step did not leave the group revoked: {error}")
    gone = json.loads(wait_for(d, "excluded", 30))
    group = group.shrink(gone)
    # A rank may have completed the step its peers failed (its all_sum had
    # every part before the victim died): all go on from the earliest.
    earliest = int(md.all_min(np.array([step], dtype=np.int64), group=group)[0])
    if earliest < step:
        w, step = w_before.copy(), earliest
    return group, step, w


# ---- the coordinator -------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def coordinate(opts):
    rng = random.Random(opts.seed)
    victim = rng.randrange(opts.ranks) if opts.victim < 0 else opts.victim
    # Late enough to have trained, early enough to recover and grow after.
    kill_at = rng.randrange(3, opts.steps - opts.join_after - 3) if opts.kill_at < 0 else opts.kill_at
    directory = tempfile.mkdtemp(prefix="mccl-elastic-")
    # One thread per rank for numpy: the ranks share the machine.
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(opts.ranks),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    common = [sys.executable, os.path.abspath(__file__), "--dir", directory, "--steps", str(opts.steps),
              "--victim", str(victim), "--kill-at", str(kill_at), "--join-after", str(opts.join_after)]
    procs = {r: subprocess.Popen(common + ["--rank-process"], env=dict(env, RANK=str(r)))
             for r in range(opts.ranks)}
    replacement = None
    announced = False
    deadline = time.monotonic() + opts.timeout
    try:
        while True:
            if time.monotonic() > deadline:
                raise SystemExit(f"elastic_train: not done within {opts.timeout} s")
            running = 0
            for r, p in procs.items():
                code = p.poll()
                if code is None:
                    running += 1
                elif r == victim and code == -signal.SIGKILL:
                    if not announced:
                        publish(directory, "excluded", json.dumps([victim]))
                        announced = True
                elif code != 0:
                    raise SystemExit(f"elastic_train: rank {r} exited with {code}")
            if replacement is None and os.path.exists(os.path.join(directory, "grow_handle")):
                replacement = subprocess.Popen(common + ["--rank-process", "--join"], env=env)
            if replacement is not None and replacement.poll() not in (None, 0):
                raise SystemExit(f"elastic_train: the replacement exited with {replacement.returncode}")
            if running == 0 and replacement is not None and replacement.poll() == 0:
                break
            if running == 0 and replacement is None:
                raise SystemExit("elastic_train: the ranks ended before a replacement joined")
            time.sleep(0.002)
        killed = float(wait_for(directory, "killed_at", 1))
        recovery = float(wait_for(directory, "recovered_at", 1)) - killed
        joined = [n for n in os.listdir(directory) if n.startswith("joined_")]
        join = float(wait_for(directory, joined[0], 1)) if joined else float("nan")
        logged = {}
        with open(os.path.join(directory, "losses")) as f:
            for line in f:
                s, loss = line.split()
                logged[int(s)] = float(loss)  # a redone step: the last one counts
        want = reference_losses(opts.steps)
        worst = max(abs(logged.get(s, float("inf")) - want[s]) / max(1.0, abs(want[s]))
                    for s in range(opts.steps))
        loss_ok = int(worst <= 1e-9)
        print(f"# {opts.ranks} ranks, rank {victim} killed at step {kill_at}, "
              f"largest loss difference {worst:.2e}", flush=True)
        print(f"recovery_s={recovery:.3f} join_s={join:.3f} loss_ok={loss_ok}", flush=True)
        return 0 if loss_ok else 1
    finally:
        for p in list(procs.values()) + ([replacement] if replacement else []):
            if p.poll() is None:
                p.kill()
                p.wait()
        for name in os.listdir(directory):
            os.unlink(os.path.join(directory, name))
        os.rmdir(directory)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=None, help="picks the rank and the step to kill")
    ap.add_argument("--victim", type=int, default=-1, help="the rank to kill (default: random)")
    ap.add_argument("--kill-at", type=int, default=-1, help="the step it dies at (default: random)")
    ap.add_argument("--join-after", type=int, default=3, help="steps between recovery and the replacement")
    ap.add_argument("--timeout", type=float, default=120.0)
    # Internal: how the coordinator starts a rank.
    ap.add_argument("--rank-process", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--join", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.rank_process:
        rank_main(opts)
        return 0
    if opts.ranks < 2 or opts.join_after < 1 or opts.steps < opts.join_after + 8:
        ap.error("--ranks must be at least 2, --join-after at least 1 and --steps at least --join-after + 8")
    if opts.kill_at >= 0 and not 0 < opts.kill_at < opts.steps - opts.join_after - 2:
        ap.error("--kill-at must leave --join-after + 2 steps after it")
    return coordinate(opts)


if __name__ == "__main__":
    sys.exit(main())
