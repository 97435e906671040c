"""Runs a test function on N ranks, each a spawned process with a
torch.distributed process group, and brings back each rank's result or
traceback. Every run has a hard deadline: ranks still alive after it are
killed and the run fails naming them, so a hang in mccl fails a test
instead of stalling the suite.

`import mccl` finds the package through PYTHONPATH (ctest sets it to the
build's python/ directory), else in ../../build/python. (Not an MCCL_*
variable: mccl refuses MCCL_ variables it does not know.)
"""

import faulthandler
import multiprocessing
import os
import queue
import socket
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, os.path.join(HERE, "..", "..", "build", "python"))

# Ranks start in well under a second here; a loaded 2-core CI machine needs
# far more headroom than that, but never minutes.
DEFAULT_DEADLINE = 120.0
KILL_GRACE = 5.0


def free_port():
    """A port the kernel just handed out on loopback (bound to port 0, then
    released and published to the ranks)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_keep_dirs = []


def file_init_url():
    """A file:// init_method in a fresh directory removed at exit."""
    d = tempfile.TemporaryDirectory(prefix="mccl-pytest-")
    _keep_dirs.append(d)
    return "file://" + os.path.join(d.name, "store")


def rank_context():
    """The multiprocessing context ranks start from: a fork server that
    imported torch once, so a rank starts in milliseconds instead of
    importing torch again (about 2 s of CPU each on the 2-core machine, and
    a test run starts hundreds). The server imports nothing else, mccl
    included, and has no threads; each rank is a fork of it, as fresh as a
    spawned process for everything the tests check."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(["torch"])
    return _context


_context = None


def _worker(fn, index, rank, world, init, backend, env, args, results, pg_timeout, deadline):
    # A rank that hangs shows where before the parent kills it.
    faulthandler.dump_traceback_later(max(1.0, deadline - KILL_GRACE), exit=False)
    try:
        os.environ.update(env)
        import datetime
        import torch
        import torch.distributed as dist
        # torch read TORCH_DISTRIBUTED_DEBUG when the fork server imported
        # it, before this rank's environment was set: read it again.
        torch._C._distributed_c10d.set_debug_level_from_env()
        # Like torchrun: ranks that share the machine's cores get one
        # intra-op thread each unless the test says otherwise; torch's
        # default (a thread per core in every rank) oversubscribes the
        # cores world-fold and made the DDP tests twice as slow.
        if "OMP_NUM_THREADS" not in env:
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        import mccl  # noqa: F401  (registers the backend)
        kwargs = dict(rank=rank, world_size=world, timeout=datetime.timedelta(seconds=pg_timeout))
        if init is not None:
            kwargs["init_method"] = init
        if backend is not None:
            dist.init_process_group(backend, **kwargs)
        value = fn(rank, world, *args)
        if backend is not None:
            dist.destroy_process_group()
        results.put((index, True, value))
    except BaseException:  # noqa: B902 -- reported to the parent, whatever it is
        results.put((index, False, traceback.format_exc()))


class RankFailure(AssertionError):
    """One or more ranks raised; `errors` maps rank -> traceback text."""

    def __init__(self, errors):
        self.errors = errors
        text = "\n".join(f"--- rank {r} ---\n{tb}" for r, tb in sorted(errors.items()))
        super().__init__(f"{len(errors)} rank(s) failed:\n{text}")


def run_ranks(fn, world, *args, init="file", backend="mccl", env=None, deadline=DEFAULT_DEADLINE,
              pg_timeout=60.0, allow_failures=False, ranks=None):
    """Runs fn(rank, world, *args) on `world` ranks after
    init_process_group(backend) (backend None: no process group).

    init: "file" (a fresh file:// store), "tcp" (tcp://127.0.0.1:<port>),
    "env" (env://: MASTER_ADDR/MASTER_PORT), or a full init_method URL.
    ranks: the RANK of each process to start, in order (default 0..world-1;
    a rank listed twice is started twice); results are then by position in
    this list. Returns the list of per-rank return values. When a rank
    raises, raises RankFailure, unless allow_failures: then returns {rank:
    (ok, value or traceback)}.
    """
    ranks = list(range(world)) if ranks is None else list(ranks)
    env = dict(env or {})
    tmp = tempfile.TemporaryDirectory(prefix="mccl-pytest-")
    if init == "file":
        init = "file://" + os.path.join(tmp.name, "store")
    elif init == "tcp":
        init = f"tcp://127.0.0.1:{free_port()}"
    elif init == "env":
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        init = "env://"
    ctx = rank_context()
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, daemon=True,
                         args=(fn, i, r, world, init, backend, env, args, results, pg_timeout, deadline))
             for i, r in enumerate(ranks)]
    for p in procs:
        p.start()
    got = {}
    end = time.monotonic() + deadline
    try:
        while len(got) < len(procs):
            left = end - time.monotonic()
            if left <= 0:
                break
            try:
                index, ok, value = results.get(timeout=min(left, 1.0))
                got[index] = (ok, value)
            except queue.Empty:
                # A rank that died without reporting (segfault, kill).
                for r, p in enumerate(procs):
                    if r not in got and not p.is_alive() and p.exitcode not in (None, 0):
                        got[r] = (False, f"rank {ranks[r]} exited with status {p.exitcode} without a "
                                         "result")
    finally:
        for p in procs:
            p.join(timeout=max(0.1, min(KILL_GRACE, end + KILL_GRACE - time.monotonic())))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=KILL_GRACE)
        tmp.cleanup()
    for r in range(len(procs)):
        got.setdefault(r, (False, f"rank {ranks[r]} gave no result within the {deadline:.0f} s deadline "
                                  "(killed)"))
    if allow_failures:
        return got
    errors = {r: v for r, (ok, v) in got.items() if not ok}
    if errors:
        raise RankFailure(errors)
    return [got[r][1] for r in range(len(procs))]
