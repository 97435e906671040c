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

from ._C import ProcessGroupMCCL

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


def register():
    if BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create_process_group, extended_api=True)
