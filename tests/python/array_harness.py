"""Runs a function on N ranks for tests of mccl.distributed (numpy, no
torch.distributed): each rank a spawned process with the launcher's
variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, or MLX's), torch made
unimportable unless asked for, and a hard deadline after which the ranks
still alive are killed and the run fails naming them.
"""

import faulthandler
import json
import multiprocessing
import os
import queue
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, os.path.join(HERE, "..", "..", "build", "python"))

from harness import free_port  # noqa: E402  (torch-free: harness imports torch only in ranks)

DEADLINE = 90.0
KILL_GRACE = 5.0


def torchrun_env(rank, world, port):
    return {"RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port)}


def mlx_ring_env(world, directory):
    """MLX_RANK + MLX_HOSTFILE as mlx.launch writes them: a list with one
    list of "ip:port" per rank. Returns rank -> environment."""
    path = os.path.join(directory, "mlx_hosts.json")
    with open(path, "w") as f:
        json.dump([[f"127.0.0.1:{free_port()}"] for _ in range(world)], f)
    return lambda rank: {"MLX_RANK": str(rank), "MLX_HOSTFILE": path}


def _worker(fn, rank, env, block_torch, args, results, deadline):
    faulthandler.dump_traceback_later(max(1.0, deadline - KILL_GRACE), exit=False)
    try:
        os.environ.update(env)
        if block_torch:
            sys.modules["torch"] = None  # `import torch` raises ImportError
        import mccl  # noqa: F401
        results.put((rank, "ok", fn(*args)))
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def run(fn, world, env=None, block_torch=True, args=(), deadline=DEADLINE):
    """fn(*args) on `world` ranks; returns the results in rank order. `env`:
    rank -> environment (default: torchrun's variables on a fresh port)."""
    if env is None:
        port = free_port()
        env = lambda rank: torchrun_env(rank, world, port)  # noqa: E731
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(fn, r, env(r), block_torch, args, results, deadline),
                         daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    got, errors = {}, []
    end = time.monotonic() + deadline
    try:
        while len(got) + len(errors) < world:
            try:
                rank, kind, value = results.get(timeout=max(0.1, end - time.monotonic()))
            except queue.Empty:
                missing = [r for r in range(world) if r not in got]
                raise AssertionError(f"ranks {missing} did not finish within {deadline} s")
            if kind == "ok":
                got[rank] = value
            else:
                errors.append(f"rank {rank}:\n{value}")
                break  # the others may now wait forever on the failed rank
    finally:
        for p in procs:
            p.join(timeout=KILL_GRACE if not errors else 0.5)
            if p.is_alive():
                p.kill()
                p.join()
    if errors:
        raise AssertionError("\n".join(errors))
    return [got[r] for r in range(world)]


def temp_dir():
    return tempfile.TemporaryDirectory(prefix="mccl-array-test-")
