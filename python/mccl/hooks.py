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

Errors. A failed op inside a DDP step makes backward() raise the class of
mccl.errors a direct op raises (mccl.PeerLostError, ...; all are
mccl.MCCLError), with the same message, for these hooks and for DDP
without a hook. torch's Future.then() turns an exception raised in its
callback into a RuntimeError that keeps only the text, so hooks that chain
with it (torch's own allreduce_hook, fp16_compress_hook, PowerSGD, most
hand-written ones) lose the class: chain with `then(fut, callback)` below
instead, or wrap the hook:

    model.register_comm_hook(None, mccl.hooks.keep_mccl_errors(default_hooks.allreduce_hook))
"""

import torch
import torch.distributed as dist

from . import _C
from .errors import MCCLError, from_code
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
        return then(work.get_future(), lambda fut: fut.value()[0])

    hook.__name__ = f"mccl_{compression}_compression_hook"
    return hook


fp16_compress_hook = compression_hook("fp16")
bf16_compress_hook = compression_hook("bf16")


def then(fut, callback):
    """`fut.then(callback)` for DDP comm hooks, keeping mccl's errors: when
    `callback` raises an mccl.MCCLError (fut.value() of a failed op), the
    returned future fails with it, and DDP's backward() raises that class
    with its message. Other exceptions fail it as torch's then() does (a
    RuntimeError with their text)."""
    out = torch.futures.Future()

    def done(f):
        try:
            result = callback(f)
        except BaseException as e:  # noqa: B902 -- handed to the future, whatever it is
            _C._fail_future(out, e)
        else:
            out.set_result(result)

    fut.add_done_callback(done)
    return out


def _mccl_error_in(error):
    """The mccl error whose text `error` (a RuntimeError made by torch's
    Future.then, perhaps several times over) carries, or None: matched
    against the latest failed ops of this process, whole message for whole
    message, so another error is never taken for an mccl one."""
    text = str(error)
    for code, what in reversed(_C._recent_failures()):
        if what in text:
            return from_code(code, what)
    return None


def keep_mccl_errors(hook):
    """Wraps a DDP comm hook that chains with torch's Future.then (torch's
    default_hooks, PowerSGD, ...) so that an mccl failure inside it reaches
    backward() as its mccl.errors class with its message, instead of the
    RuntimeError torch's then() makes of it."""

    def wrapped(state, bucket):
        def value(f):
            try:
                return f.value()
            except RuntimeError as e:
                if isinstance(e, MCCLError):
                    raise
                original = _mccl_error_in(e)
                if original is None:
                    raise
                raise original from None

        return then(hook(state, bucket), value)

    wrapped.__name__ = getattr(hook, "__name__", "hook")
    wrapped.__qualname__ = getattr(hook, "__qualname__", wrapped.__name__)
    return wrapped
