"""mccl as a torch.distributed backend for CPU tensors.

    import mccl                                  # registers backend "mccl"
    import torch.distributed as dist
    dist.init_process_group("mccl", init_method="env://")

Rendezvous goes through the store torch.distributed hands the backend
(file://, tcp:// and env:// all work). Settings: mccl.init(**kwargs) or an
mccl.MCCLConfig, set before init_process_group; they beat MCCL_* environment
variables. Metrics: mccl.get_metrics(), mccl.log_metrics(), mccl.reset_metrics().
Gradient compression for DDP: mccl.hooks.compression_hook("fp16").
"""

import atexit
import datetime

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from . import _C
from ._C import MCCLError, ProcessGroupMCCL
from .config import MCCLConfig, get_config, init, reset_config
from .metrics import get_metrics, log_metrics, reset_metrics
from . import hooks

__all__ = [
    "MCCLConfig", "MCCLError", "ProcessGroupMCCL", "init", "get_config", "reset_config",
    "get_metrics", "log_metrics", "reset_metrics", "hooks", "BACKEND",
]

BACKEND = "mccl"


def _timeout_ms(timeout):
    if isinstance(timeout, datetime.timedelta):
        return int(timeout.total_seconds() * 1000)
    return int(float(timeout) * 1000)  # seconds, as torch's duration<float>


def _create_process_group(dist_options, pg_options=None):
    """torch.distributed's creator: called for the default group and for
    every new_group this rank belongs to, with that group's prefixed store."""
    return ProcessGroupMCCL(dist_options.store, dist_options.group_rank, dist_options.group_size,
                            _timeout_ms(dist_options.timeout), str(dist_options.group_id))


def _register():
    if BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create_process_group, extended_api=True)


_register()
# Process groups still open at exit keep the runtime alive; drop ours so
# the runtime stops with the last of them rather than at static destruction.
atexit.register(_C.release_runtime)
