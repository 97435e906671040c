"""mccl for Python: collectives on numpy arrays (and torch CPU tensors), and
a torch.distributed backend.

    from mccl import distributed as md           # mirrors mlx.core.distributed
    group = md.init()                            # from mcclrun / torchrun / mlx.launch
    total = md.all_sum(np.ones(4, np.float32))

    import mccl, torch.distributed as dist       # with torch: backend "mccl"
    dist.init_process_group("mccl", init_method="env://")

Only numpy is needed; with torch and the extension mccl._C present, the
backend "mccl" registers itself on import (mccl.TORCH_BACKEND says whether
it did). Settings: mccl.init(**kwargs) or an mccl.MCCLConfig, set before the
first group; they beat MCCL_* environment variables. Metrics:
mccl.get_metrics(), mccl.log_metrics(), mccl.reset_metrics(). Errors:
mccl.MCCLError and one subclass per error code (mccl.errors). Tensor
parallelism for torch: mccl.nn. Gradient compression for DDP: mccl.hooks.
"""

from . import errors
from .errors import *  # noqa: F401,F403  (mccl.MCCLError, mccl.PeerLostError, ...)
from .config import MCCLConfig, get_config, init, reset_config
from .metrics import get_metrics, log_metrics, reset_metrics
from . import distributed

BACKEND = "mccl"


def _register_torch_backend():
    """True when torch.distributed now knows backend "mccl"."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    try:
        from . import torch_backend
    except ImportError as e:
        # torch is there but the extension was not built (no pybind11 or
        # libtorch-dev at build time): the numpy API still works.
        import warnings
        warnings.warn(f"mccl: torch is installed but mccl's torch backend is not built ({e}); "
                      "mccl.distributed works, backend 'mccl' does not", RuntimeWarning,
                      stacklevel=3)
        return False
    torch_backend.register()
    return True


TORCH_BACKEND = _register_torch_backend()
if TORCH_BACKEND:
    from . import hooks  # noqa: F401
    from ._C import ProcessGroupMCCL  # noqa: F401
    from .torch_backend import backend_of  # noqa: F401

__all__ = ["MCCLConfig", "init", "get_config", "reset_config", "get_metrics", "log_metrics",
           "reset_metrics", "distributed", "errors", "BACKEND", "TORCH_BACKEND"] + errors.__all__
