"""Registers mccl as torch.distributed's backend "mccl" (imported by
`import mccl` when torch and the extension mccl._C are there).

    import mccl                                  # registers backend "mccl"
    import torch.distributed as dist
    dist.init_process_group("mccl", init_method="env://")

Rendezvous goes through the store torch.distributed hands the backend
(file://, tcp:// and env:// all work).
"""

import datetime

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from . import _torch_build
from .errors import UnsupportedError


def _release(version):
    """"2.13.0+cpu" -> "2.13.0": builds of one release share its C++ ABI."""
    return version.split("+")[0]


if _release(torch.__version__) != _release(_torch_build.TORCH_VERSION):
    raise UnsupportedError(
        f"mccl's torch backend was built against torch {_torch_build.TORCH_VERSION}, but this "
        f"Python has torch {torch.__version__}: the extension only loads into the torch release "
        "it was built for. Rebuild it for this torch (tools/dev.sh build, or pip install . again).")

from ._C import ProcessGroupMCCL  # noqa: E402  (after the version check)

BACKEND = "mccl"


def _timeout_ms(timeout):
    if isinstance(timeout, datetime.timedelta):
        return int(timeout.total_seconds() * 1000)
    return int(float(timeout) * 1000)  # seconds, as torch's duration<float>


def _create_backend(dist_options, backend_options=None):
    """torch.distributed's creator: called for the default group and for
    every new_group this rank belongs to, with that group's prefixed store.
    It returns the c10d Backend that torch's ProcessGroup hands CPU tensors."""
    return ProcessGroupMCCL(dist_options.store, dist_options.group_rank, dist_options.group_size,
                            _timeout_ms(dist_options.timeout), str(dist_options.group_id))


def backend_of(group=None):
    """The ProcessGroupMCCL serving `group`'s CPU tensors (default: the
    default group), or None when another backend serves them. torch 2.x
    wraps backends in a ProcessGroup (and, in DETAIL debug mode, in a
    checking wrapper too); mccl's own calls (compressed allreduce,
    op_timeout_ms) live on the backend."""
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    if isinstance(group, ProcessGroupMCCL):
        return group
    try:
        backend = group._get_backend(torch.device("cpu"))
    except RuntimeError:  # no backend for CPU tensors in this group
        return None
    # Under TORCH_DISTRIBUTED_DEBUG=DETAIL torch wraps the backend in its
    # checking wrapper; mccl's calls are on the backend inside.
    backend = getattr(backend, "wrapped_pg", backend)
    return backend if isinstance(backend, ProcessGroupMCCL) else None


def register():
    if BACKEND.upper() in dist.Backend._plugins:
        return
    # devices=["cpu"]: mccl serves CPU tensors, so "cpu:mccl,cuda:nccl"
    # mixes it with a GPU backend.
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["cpu"])
