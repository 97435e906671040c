"""Collectives on numpy arrays (and torch CPU tensors), shaped like MLX's
`mlx.core.distributed`:

    from mccl import distributed as md
    group = md.init()                      # the world the launcher describes
    print(group.rank(), group.size())
    total = md.all_sum(np.arange(4, dtype=np.float32))
    rows = md.all_gather(x)                # concatenated along the first axis
    mine = md.sum_scatter(x)               # this rank's slice of the sum
    md.send(x, dst=1); y = md.recv((4,), np.float32, src=0)
    work = md.all_sum_async(x); ...; total = work.wait()
    pairs = group.split(group.rank() % 2)

`init()` reads what mcclrun, torchrun (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) or mlx.launch (MLX_RANK with MLX_HOSTFILE, or the JACCL
variables) put in the environment. Run alone, it is a group of one whose
ops return copies; with strict=True that is an error instead. A second
init() returns the same group. Every op takes `group=` (default: the world)
and returns a new array of the input's kind; the inputs are not changed.

The dtypes are those mccl supports: float32, float64, float16, int8, uint8,
int32, int64 and bool for numpy; bfloat16 too for torch tensors. Failures
raise mccl.MCCLError subclasses (mccl.errors) carrying the C++ error code.
Ops are built on libmccl's C API (include/mccl/mccl.h) and release the GIL
while they run.
"""

import atexit
import ctypes
import threading

import numpy as np

from . import _lib
from .errors import InvalidArgumentError

# mccl_dtype_t and mccl_redop_t (include/mccl/mccl.h).
_NUMPY_DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.float16): 2,
                 np.dtype(np.int8): 4, np.dtype(np.uint8): 5, np.dtype(np.int32): 6,
                 np.dtype(np.int64): 7, np.dtype(np.bool_): 8}
_SUM, _MIN, _MAX = 0, 2, 3

# MLX's backend names; mccl itself runs ring-style (TCP, shared memory) or
# JACCL-style (RDMA, falling back to TCP where there is none).
_BACKEND_TRANSPORT = {"any": None, "mccl": None, "ring": "tcp", "jaccl": "rdma"}

_lock = threading.Lock()
_runtime = None  # the C API runtime handle while any group exists
_world = None
_groups = []  # every group this process made, finalized at exit


class Group:
    """A group of ranks (an mccl communicator). Ranks are 0..size()-1."""

    def __init__(self, handle):
        self._handle = handle
        rank, size = ctypes.c_int(), ctypes.c_int()
        _lib.call("mccl_comm_rank", handle, ctypes.byref(rank))
        _lib.call("mccl_comm_size", handle, ctypes.byref(size))
        self._rank, self._size = rank.value, size.value

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def split(self, color, key=-1):
        """Collective over this group: ranks passing the same `color` form a
        new group, ordered by `key` (-1: by rank here). A negative color
        joins none and returns None."""
        handle = _lib.new_handle("mccl_comm_split", self._live(), int(color),
                                 self._rank if key == -1 else int(key))
        return _remember(Group(handle)) if handle else None

    def _live(self):
        if self._handle is None:
            raise _finalized()
        return self._handle

    def _close(self):
        handle, self._handle = self._handle, None
        if handle:
            _lib.lib.mccl_comm_destroy(handle)

    def __repr__(self):
        return f"mccl.distributed.Group(rank={self._rank}, size={self._size})"


def is_available():
    """mccl's distributed ops are always available (True), as in MLX."""
    return True


def init(strict=False, backend="any"):
    """The world group, made on the first call from the launcher's
    environment; later calls return the same group. `backend`: "any" or
    "mccl" (mccl picks the transport), "ring" (TCP and shared memory) or
    "jaccl" (RDMA, falling back to TCP where there is none)."""
    global _world
    if backend not in _BACKEND_TRANSPORT:
        raise InvalidArgumentError(
            f"mccl.distributed.init: backend {backend!r} is not available; mccl runs "
            f"{', '.join(repr(b) for b in _BACKEND_TRANSPORT)} (MPI and NCCL jobs: start the ranks "
            "with mcclrun, torchrun or mlx.launch and use backend 'any')")
    with _lock:
        if _world is not None:
            return _world
        transport = _BACKEND_TRANSPORT[backend]
        if transport is not None:
            from .config import init as set_settings
            set_settings(transport=transport)
        handle = _lib.new_handle("mccl_comm_from_env", _runtime_handle(), 1 if strict else 0)
        _world = _remember(Group(handle))
        return _world


# ---- ops ------------------------------------------------------------------------


class Work:
    """An op in flight: wait() returns its result (or raises its error)."""

    def __init__(self, handle, result, keep):
        self._handle = handle
        self._result = result
        self._keep = keep  # the buffers the op reads and writes stay alive

    def is_completed(self):
        if self._handle is None:
            return True
        done = ctypes.c_int()
        _lib.call("mccl_work_test", self._handle, ctypes.byref(done))
        return bool(done.value)

    def wait(self, timeout=None):
        """Blocks until done (bounded by MCCL_TIMEOUT_MS) and returns the
        result. With `timeout` (seconds) raises mccl.TimeoutError if the op is
        still running then; the op goes on and wait() may be called again."""
        if self._handle is not None:
            if timeout is None:
                status = _lib.lib.mccl_work_wait(self._handle)
            else:
                done = ctypes.c_int()
                status = _lib.lib.mccl_work_wait_for(self._handle, int(timeout * 1000),
                                                     ctypes.byref(done))
                if status == 0 and not done.value:
                    from .errors import TimeoutError
                    raise TimeoutError(f"mccl: the op did not finish within {timeout} s")
            self._release()
            _lib.check(status)
        return self._result

    def _release(self):
        handle, self._handle = self._handle, None
        _lib.lib.mccl_work_free(handle)
        self._keep = None

    def __del__(self):
        # Dropping an unfinished op must not free buffers it still writes.
        if getattr(self, "_handle", None) is not None:
            _lib.lib.mccl_work_wait(self._handle)
            self._release()


def all_sum(x, *, group=None, stream=None):
    """The elementwise sum of `x` over the group."""
    return all_sum_async(x, group=group).wait()


def all_sum_async(x, *, group=None):
    return _allreduce(x, _SUM, group)


def all_max(x, *, group=None, stream=None):
    """The elementwise maximum of `x` over the group."""
    return all_max_async(x, group=group).wait()


def all_max_async(x, *, group=None):
    return _allreduce(x, _MAX, group)


def all_min(x, *, group=None, stream=None):
    """The elementwise minimum of `x` over the group."""
    return all_min_async(x, group=group).wait()


def all_min_async(x, *, group=None):
    return _allreduce(x, _MIN, group)


def all_gather(x, *, group=None, stream=None):
    """Every rank's `x` concatenated along the first axis, in rank order
    (a scalar counts as shape (1,))."""
    return all_gather_async(x, group=group).wait()


def all_gather_async(x, *, group=None):
    g = _group(group)
    src = _Buffer(x, "all_gather")
    shape = src.shape or (1,)
    out = src.empty((shape[0] * g.size(),) + tuple(shape[1:]))
    return _issue("mccl_allgather", g, (src.ptr, out.ptr, src.count, src.code), out, src)


def sum_scatter(x, *, group=None, stream=None):
    """The sum over the group, split along the first axis: rank r gets the
    r-th of size() equal slices. The first axis must divide by size()."""
    return sum_scatter_async(x, group=group).wait()


def sum_scatter_async(x, *, group=None):
    g = _group(group)
    src = _Buffer(x, "sum_scatter")
    rows = src.shape[0] if src.shape else 1
    if rows % g.size() != 0:
        raise InvalidArgumentError(f"mccl: sum_scatter on rank {g.rank()}: the first axis ({rows}) "
                                   f"does not divide by the group size {g.size()}")
    out = src.empty((rows // g.size(),) + tuple(src.shape[1:]))
    return _issue("mccl_reduce_scatter", g, (src.ptr, out.ptr, out.count, src.code, _SUM), out, src)


def send(x, dst, *, group=None, stream=None):
    """Sends `x` to rank `dst`; returns `x` once it is sent. The receiver
    calls recv or recv_like with the same shape and dtype."""
    return send_async(x, dst, group=group).wait()


def send_async(x, dst, *, group=None):
    g = _group(group)
    src = _Buffer(x, "send")
    return _issue("mccl_send", g, (src.ptr, src.count, src.code, _peer(g, dst, "send"), 0), x, src)


def recv(shape, dtype, src, *, group=None, stream=None):
    """A numpy array of `shape` and `dtype` received from rank `src`."""
    return recv_async(shape, dtype, src, group=group).wait()


def recv_async(shape, dtype, src, *, group=None):
    template = np.empty(0, dtype=np.dtype(dtype))
    return _recv_into(_Buffer(template, "recv").empty(tuple(shape)), src, group)


def recv_like(x, src, *, group=None, stream=None):
    """An array like `x` (shape, dtype, numpy or torch) received from `src`."""
    return recv_like_async(x, src, group=group).wait()


def recv_like_async(x, src, *, group=None):
    return _recv_into(_Buffer(x, "recv_like").empty(), src, group)


def barrier(*, group=None):
    """Returns once every rank of the group has called it."""
    g = _group(group)
    _issue("mccl_barrier", g, (), None, None).wait()


# ---- plumbing ---------------------------------------------------------------------


def _allreduce(x, op, group):
    g = _group(group)
    src = _Buffer(x, "all_sum" if op == _SUM else "all_max" if op == _MAX else "all_min")
    out = src.empty()
    return _issue("mccl_allreduce", g, (src.ptr, out.ptr, src.count, src.code, op), out, src)


def _recv_into(out, src, group):
    g = _group(group)
    return _issue("mccl_recv", g, (out.ptr, out.count, out.code, _peer(g, src, "recv"), 0), out, None)


def _issue(fn, group, args, result, source):
    """Starts the C API op `fn` on `group` and returns its Work; the Work
    keeps the source and result buffers alive until the op is done."""
    work = ctypes.c_void_p()
    _lib.check(getattr(_lib.lib, fn)(group._live(), *args, ctypes.byref(work)))
    out = result.array if isinstance(result, _Buffer) else result
    return Work(work.value, out, (source, result))


class _Buffer:
    """A contiguous CPU numpy array or torch tensor with its mccl dtype code."""

    def __init__(self, x, op):
        self.op = op
        if isinstance(x, np.ndarray) or np.isscalar(x):
            x = np.ascontiguousarray(x)
            code = _NUMPY_DTYPES.get(x.dtype)
            if code is None:
                raise InvalidArgumentError(
                    f"mccl: {op}: numpy dtype {x.dtype} is not supported; use one of "
                    + ", ".join(str(d) for d in _NUMPY_DTYPES))
            self.ptr, self.count = x.ctypes.data, x.size
        elif _is_torch_tensor(x):
            if x.device.type != "cpu":
                raise InvalidArgumentError(f"mccl: {op}: the tensor is on {x.device}; mccl moves CPU memory")
            x = x.contiguous()
            code = _torch_dtypes().get(x.dtype)
            if code is None:
                raise InvalidArgumentError(f"mccl: {op}: torch dtype {x.dtype} is not supported")
            self.ptr, self.count = x.data_ptr(), x.numel()
        else:
            raise InvalidArgumentError(f"mccl: {op}: expected a numpy array or a torch CPU tensor, "
                                       f"got {type(x).__name__}")
        self.array, self.code, self.shape = x, code, tuple(x.shape)

    def empty(self, shape=None):
        """A new buffer of the same kind and dtype (and shape unless given)."""
        shape = self.shape if shape is None else shape
        if isinstance(self.array, np.ndarray):
            return _Buffer(np.empty(shape, dtype=self.array.dtype), self.op)
        import torch
        return _Buffer(torch.empty(shape, dtype=self.array.dtype), self.op)


def _is_torch_tensor(x):
    torch = __import__("sys").modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _torch_dtypes():
    import torch
    return {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3,
            torch.int8: 4, torch.uint8: 5, torch.int32: 6, torch.int64: 7, torch.bool: 8}


def _peer(group, peer, op):
    peer = int(peer)
    if not 0 <= peer < group.size() or peer == group.rank():
        raise InvalidArgumentError(f"mccl: {op} on rank {group.rank()}: peer {peer} is not another "
                                   f"rank of this group of {group.size()}")
    return peer


def _group(group):
    return group if group is not None else init()


def _runtime_handle():
    global _runtime
    if _runtime is None:
        _runtime = _lib.new_handle("mccl_runtime_create")
    return _runtime


def _remember(group):
    _groups.append(group)
    return group


def _finalized():
    from .errors import FinalizedError
    return FinalizedError("mccl: this group was finalized (the interpreter is exiting)")


@atexit.register
def _shutdown():
    """Finalizes every group, newest first, then lets the runtime stop."""
    global _runtime, _world
    with _lock:
        while _groups:
            _groups.pop()._close()
        _world = None
        if _runtime is not None:
            _lib.lib.mccl_runtime_destroy(_runtime)
            _runtime = None
