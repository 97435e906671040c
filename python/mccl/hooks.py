"""DDP communication hooks that compress gradients on the wire.

    model = torch.nn.parallel.DistributedDataParallel(model)
    model.register_comm_hook(None, mccl.hooks.compression_hook("fp16"))
    model.register_comm_hook(None, mccl.hooks.compression_hook("topk", ratio=0.01))

Each gradient bucket is averaged with one mccl allreduce whose float32
payload travels as float16 ("fp16") or bfloat16 ("bf16"): half the bytes,
rounded to nearest even, summed in float32, the same bits on every rank.
"topk" sends only the `ratio` largest-magnitude elements of each rank's
bucket; with error feedback (the default) what was not sent is kept per
bucket and added to the next step's gradients, so it is delayed, not lost.
Buckets of other dtypes, and buckets of at most MCCL_SMALL_MSG_THRESHOLD
bytes, travel exactly. This compresses DDP's gradients only; the process
group's other ops stay exact (MCCL_COMPRESSION compresses every op).
"""

import torch
import torch.distributed as dist

from .torch_backend import backend_of

_KINDS = ("fp16", "bf16", "topk", "none")


def _mccl_group(state):
    group = state if state is not None else dist.distributed_c10d._get_default_group()
    backend = backend_of(group)
    if backend is None:
        raise TypeError(f"mccl compression hooks need a process group whose CPU tensors mccl serves, "
                        f"got one of backend {dist.get_backend(group)!r} (init_process_group('mccl', ...), "
                        "or pass the mccl group as the hook's state)")
    return backend


def compression_hook(compression="fp16", ratio=None, error_feedback=True):
    """A DDP comm hook averaging each bucket with `compression` on the wire.
    Register it with state None (the default group) or an mccl process
    group. `ratio` (topk only): the fraction of elements sent, default
    MCCL_TOPK_RATIO; `error_feedback` (topk only): keep what was not sent."""
    if compression not in _KINDS:
        raise ValueError(f"mccl: compression {compression!r}: expected one of {', '.join(_KINDS)}")
    if ratio is not None and not 0 < ratio <= 1:
        raise ValueError(f"mccl: topk ratio {ratio!r}: expected a fraction in (0, 1]")

    def hook(state, bucket):
        group = _mccl_group(state)
        tensor = bucket.buffer()
        op = "avg" if tensor.is_floating_point() else "sum"
        wire = compression if tensor.dtype == torch.float32 else "none"
        # Residuals are kept per bucket: its index is stable across steps,
        # its buffer's address is not (DDP rebuilds buckets once).
        work = group.allreduce_compressed([tensor], wire, op, ratio or 0.0, error_feedback,
                                          bucket.index() + 1)
        return work.get_future().then(lambda fut: fut.value()[0])

    hook.__name__ = f"mccl_{compression}_compression_hook"
    return hook


fp16_compress_hook = compression_hook("fp16")
bf16_compress_hook = compression_hook("bf16")
