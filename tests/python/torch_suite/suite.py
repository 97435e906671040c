"""PyTorch's own distributed test suite, the one the torch wheel ships
(torch.testing._internal.distributed.distributed_test), bound to one backend
the way PyTorch's test/distributed/test_distributed_spawn.py binds it: the
environment names the backend and world size, and a test class joins the
suite's base (DistributedTest._DistTestBase) to its process launcher
(TestDistBackend), which spawns WORLD_SIZE ranks per test.

run_suite.py sets the environment and runs this module's class; the ranks
import this module again (by name, with the parent's environment), so
everything a rank needs happens at import:

    BACKEND     the backend the suite runs for: gloo or mccl (mccl registers
                itself on `import mccl`)
    WORLD_SIZE  ranks per test (PyTorch runs gloo with 3 on a machine without GPUs)
    TEMP_DIR    a scratch folder with barrier/ and test_dir/ in it
    TORCH_SUITE_GROUPS_ON
                optional, mccl with BACKEND=gloo: the suite believes it runs
                gloo (which tests run, which skip, the branches a test takes
                on the backend's name) while every process group it asks
                gloo for is made by mccl. The suite gates many tests on
                gloo's name (`BACKEND != "gloo"`, its lists of backends with
                DDP or subgroups, `if BACKEND == "gloo"` in a test's body);
                this runs those tests over mccl. A test that compares
                dist.get_backend() with BACKEND fails this way by design (it
                says mccl).
    TORCH_SUITE_START
                optional: forkserver starts each rank as a fork of one server
                process that imported this module once, instead of a fresh
                interpreter per rank (spawn, PyTorch's way): the same tests
                with a fraction of the start-up (importing torch and the suite
                costs seconds of CPU per rank).

Each rank asks the kernel to kill it when the process that started it dies
(prctl PR_SET_PDEATHSIG), so a runner killed at its deadline leaves no
ranks behind.
"""

import ctypes
import json
import os
import signal
import sys

for _name in ("BACKEND", "WORLD_SIZE", "TEMP_DIR"):
    if _name not in os.environ:
        raise RuntimeError(f"torch_suite/suite.py needs {_name} in the environment: "
                           "run it through run_suite.py")

BACKEND = os.environ["BACKEND"]


def _die_with_parent():
    """This process gets SIGKILL when the one that started it exits."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the spawner died before prctl took effect
        os._exit(1)


import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

GROUPS_ON = os.environ.get("TORCH_SUITE_GROUPS_ON") or BACKEND
if "mccl" in (BACKEND, GROUPS_ON):
    import mccl  # noqa: E402,F401  (registers backend "mccl")

from torch.testing._internal.distributed import distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


def _groups_on(real, pretended):
    """Makes the process-group constructors of torch.distributed build
    `real` groups where `pretended` is asked for (by name, or by default)."""
    import functools
    import inspect

    def swap(name):
        if isinstance(name, str) and pretended in name.lower():
            return name.lower().replace(pretended, real)
        return name

    for fn_name in ("init_process_group", "new_group", "new_subgroups", "new_subgroups_by_enumeration"):
        fn = getattr(dist, fn_name)
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, __fn=fn, __signature=signature, **kwargs):
            bound = __signature.bind(*args, **kwargs)
            if "backend" in bound.arguments:
                bound.arguments["backend"] = swap(bound.arguments["backend"])
            return __fn(*bound.args, **bound.kwargs)

        setattr(dist, fn_name, wrapper)
        setattr(dist.distributed_c10d, fn_name, wrapper)


if GROUPS_ON != BACKEND:
    _groups_on(GROUPS_ON, BACKEND)

# As PyTorch's spawn runner: exact float32 matmuls where TF32 exists.
torch.backends.cuda.matmul.allow_tf32 = False


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    """Every test of the suite; each spawns WORLD_SIZE ranks of BACKEND."""

    def setUp(self):
        super().setUp()
        if os.environ.get("TORCH_SUITE_START") == "forkserver":
            # A forked rank has the server's environment, not this test's
            # (set-up gives each test its own TEMP_DIR): hand it over.
            with open(self.file_name + ".env", "w", encoding="utf-8") as f:
                json.dump(dict(os.environ), f)
            self._start_processes(torch.multiprocessing.get_context("forkserver").Process)
        else:
            self._spawn_processes()

    def tearDown(self):
        super().tearDown()
        # The ranks' file store and its environment (MultiProcessTestCase
        # leaves its file in the temp folder).
        for leftover in (self.file_name, self.file_name + ".env"):
            try:
                os.remove(leftover)
            except OSError:
                pass

    @classmethod
    def _run(cls, rank, test_name, file_name, pipe, **kwargs):
        _die_with_parent()
        if os.environ.get("TORCH_SUITE_START") == "forkserver":
            with open(file_name + ".env", encoding="utf-8") as f:
                environment = json.load(f)
            os.environ.clear()
            os.environ.update(environment)
            # What a spawned rank reads at import: this test's init file.
            distributed_test.INIT_METHOD = os.environ["INIT_METHOD"]
        super()._run(rank, test_name, file_name, pipe, **kwargs)
