"""Collectives on numpy arrays (and torch CPU tensors), shaped like MLX's
`mlx.core.distributed`:

    from mccl import distributed as md
    group = md.init()                      # the world the launcher describes
    print(group.rank(), group.size())
    total = md.all_sum(np.arange(4, dtype=np.float32))
    rows = md.all_gather(x)                # concatenated along the first axis
    mine = md.sum_scatter(x)               # this rank's slice of the sum
    parts = md.all_to_all(x)               # row block j goes to rank j
    same = md.broadcast(x, root=0)         # rank 0's x on every rank
    md.send(x, dst=1); y = md.recv((4,), np.float32, src=0)
    work = md.all_sum_async(x); ...; total = work.wait()
    pairs = group.split(group.rank() % 2)
    group.revoke("why"); survivors = group.shrink([3])   # after a failure
    bigger = group.grow(handle)            # handle = group.grow_handle(6) on one rank
    newcomer = md.join(handle)             # in a process that has no group yet
    nxt = group.reconfigure(uuid, handles, timeout=10)   # all or nothing

`init()` reads what mcclrun, torchrun (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) or mlx.launch (MLX_RANK with MLX_HOSTFILE, or the JACCL
variables) put in the environment. Run alone, it is a group of one whose
ops return copies; with strict=True that is an error instead. A second
init() returns the same group (a second init() naming another backend is an
error: one process has one world). Every op takes `group=` (default: the
world, made by init() on first use, as in MLX) and returns a new array of
the input's kind; the inputs are not changed.

The dtypes are those mccl supports: float32, float64, float16, bfloat16
(numpy through ml_dtypes.bfloat16, where installed), int8, int16, int32,
int64, uint8, uint16, uint32, uint64 and bool; the same for torch tensors.
Ranks must pass arrays of the same dtype and element count (a mismatch is
an error); the shape is not compared across ranks: a rank passing (2, 3)
where another passes (3, 2) gets a result of its own shape, filled in
element order. Failures raise mccl.MCCLError subclasses (mccl.errors)
carrying the C++ error code. Ops are built on libmccl's C API
(include/mccl/mccl.h) and release the GIL while they run.
"""

import atexit
import ctypes
import json
import os
import threading

import numpy as np

from . import _lib
from .errors import InvalidArgumentError

# mccl_dtype_t and mccl_redop_t (include/mccl/mccl.h).
_NUMPY_DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.float16): 2,
                 np.dtype(np.int8): 4, np.dtype(np.uint8): 5, np.dtype(np.int32): 6,
                 np.dtype(np.int64): 7, np.dtype(np.bool_): 8, np.dtype(np.int16): 9,
                 np.dtype(np.uint16): 10, np.dtype(np.uint32): 11, np.dtype(np.uint64): 12}
_BFLOAT16 = 3
_SUM, _MIN, _MAX = 0, 2, 3

# MLX's backend names; mccl itself runs ring-style (TCP, shared memory) or
# JACCL-style (RDMA, falling back to TCP where there is none).
_BACKEND_TRANSPORT = {"any": None, "mccl": None, "ring": "tcp", "jaccl": "rdma"}
# MLX backends mccl does not run. As in MLX when the backend is missing, a
# process that is alone gets a group of one (strict=True: an error).
_FOREIGN_BACKENDS = ("mpi", "nccl")

_lock = threading.Lock()
_runtime = None  # the C API runtime handle while any group exists
_world = None
_world_backend = None  # the backend= of the init() that made _world
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

    def shrink(self, excluded):
        """The ranks not in `excluded` form a new group (new rank = place
        among them), in the same processes; every one of them calls this with
        the same list. Works on a revoked or aborted group: it needs nothing
        from this one but its rendezvous store."""
        ranks = [int(r) for r in excluded]
        array = (ctypes.c_int * len(ranks))(*ranks) if ranks else None
        return _remember(Group(_lib.new_handle("mccl_comm_shrink", self._live(), array, len(ranks))))

    def revoke(self, reason="revoked from Python"):
        """Revokes this group on every rank, without destroying it: ops in
        flight end on every rank (each completes on all ranks or fails on all
        with mccl.errors.RevokedError naming this rank and `reason`); later ops
        raise RevokedError at once. shrink() and split() still work, so the
        ranks can go on in a new group. See docs/cpp-api.md, "Revoke"."""
        _lib.call("mccl_comm_revoke", self._live(), str(reason).encode())

    def revoked(self):
        """True once this rank knows the group is revoked (its own revoke()
        or another rank's)."""
        out = ctypes.c_int()
        _lib.call("mccl_comm_revoked", self._live(), ctypes.byref(out))
        return bool(out.value)

    def grow_handle(self, new_size):
        """On one rank (a coordinator): a printable handle that grows this
        group to `new_size` ranks. Pass it to every rank of this group, which
        call grow(handle), and to the newcomers, which call join(handle)."""
        return _lib.text("mccl_comm_grow_handle", self._live(), int(new_size))

    def grow(self, handle):
        """Every rank of this group: the grown group, this group's ranks
        first (each keeps its rank), then the newcomers. This group stays
        usable until the process exits; broadcast the state from an old rank
        to bring the newcomers up to date."""
        return _remember(Group(_lib.new_handle("mccl_comm_grow", self._live(), _text(handle, "handle"))))

    def get_reconfigure_handle(self):
        """This member's handle for reconfigure() (the same on every call)."""
        return _lib.text("mccl_comm_reconfigure_handle", self._live())

    def reconfigure(self, uuid, handles, timeout=60.0):
        """The next group, made of the members whose handles are listed (rank
        = place in the list, this member's own handle included); every listed
        member calls it with the same uuid and list. All or nothing within
        `timeout` seconds: when a member fails or never calls, every member
        gets an mccl.MCCLError, no group, and keeps this one; retry with a new
        uuid. See docs/cpp-api.md, "Reconfigure"."""
        uuid, array, n, ms = _reconfigure_args(uuid, handles, timeout)
        return _remember(Group(_lib.new_handle("mccl_comm_reconfigure", self._live(), uuid, array, n, ms)))

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
    "jaccl" (RDMA, falling back to TCP where there is none). "mpi" and
    "nccl" are MLX backends mccl does not run: a process started alone gets
    a group of one, as MLX gives when the backend is missing (strict=True:
    an error); a process of a launched job gets an error naming "any"."""
    global _world, _world_backend
    if backend in _FOREIGN_BACKENDS:
        return _init_foreign(backend, strict)
    if backend not in _BACKEND_TRANSPORT:
        raise InvalidArgumentError(
            f"mccl.distributed.init: backend {backend!r} is not available; mccl runs "
            f"{', '.join(repr(b) for b in _BACKEND_TRANSPORT)} (MPI and NCCL jobs: start the ranks "
            "with mcclrun, torchrun or mlx.launch and use backend 'any')")
    with _lock:
        if _world is not None:
            _check_same_backend(backend)
            return _world
        transport = _BACKEND_TRANSPORT[backend]
        if transport is not None:
            from .config import init as set_settings
            set_settings(transport=transport)
        handle = _lib.new_handle("mccl_comm_from_env", _runtime_handle(), 1 if strict else 0)
        _world = _remember(Group(handle))
        _world_backend = backend
        return _world


def world():
    """The group init() made, or None before init() (nothing is made)."""
    return _world


def launched_world_size():
    """How many ranks the launcher's environment says this job has (1 when
    the process was started alone, None when a launcher variable is there
    but does not say). Makes no connection."""
    env = os.environ
    if env.get("WORLD_SIZE"):
        return _int_or_none(env["WORLD_SIZE"])
    if env.get("MLX_RANK"):
        hostfile = env.get("MLX_HOSTFILE") or env.get("MLX_IBV_DEVICES")
        try:
            with open(hostfile) as f:
                return len(json.load(f))
        except (OSError, TypeError, ValueError):
            return None
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"):
        if env.get(name):
            return _int_or_none(env[name])
    return 1


def _int_or_none(text):
    try:
        return int(text)
    except ValueError:
        return None


def _launcher_variables():
    names = ("WORLD_SIZE", "RANK", "MLX_RANK", "MLX_HOSTFILE", "MLX_JACCL_COORDINATOR",
             "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
    return ", ".join(f"{n}={os.environ[n]}" for n in names if os.environ.get(n))


def _init_foreign(backend, strict):
    global _world, _world_backend
    size = launched_world_size()
    if size != 1:
        raise InvalidArgumentError(
            f"mccl.distributed.init(backend={backend!r}): mccl does not run MLX's {backend} backend, "
            f"and this process is one of {size if size else 'several'} ranks "
            f"({_launcher_variables()}): start the ranks with mcclrun, torchrun or mlx.launch and "
            "use backend='any'")
    if strict:
        raise InvalidArgumentError(
            f"mccl.distributed.init(backend={backend!r}, strict=True): mccl does not run MLX's "
            f"{backend} backend; use backend='any' (or 'ring', 'jaccl')")
    with _lock:
        if _world is not None:
            _check_same_backend(backend)
            return _world
        # Alone: the group of one that mccl_comm_from_env makes without a launcher.
        handle = _lib.new_handle("mccl_comm_from_env", _runtime_handle(), 0)
        _world = _remember(Group(handle))
        _world_backend = backend
        return _world


def _check_same_backend(backend):
    """A later init() asking for another backend than the world's would get
    a group that is not what it asked for: say so instead."""
    if backend in ("any", _world_backend):
        return
    raise InvalidArgumentError(
        f"mccl.distributed.init(backend={backend!r}): this process's world group was already made "
        f"with backend={_world_backend!r} (size {_world.size()}); one process has one world group. "
        "Choose the backend in the first init() (or call init() without backend= to get the "
        "existing group)")


# ---- joining without a group -----------------------------------------------------

_member_handle = None  # this process's reconfigure handle, made on first use


def join(handle, rank=-1):
    """A newcomer's side of Group.grow(): joins the grown group as `rank`
    (old size <= rank < new size) or, with -1, as the first newcomer's rank
    no other newcomer took. The returned group becomes this process's world
    (what ops use without group=) when init() has not made one."""
    global _world, _world_backend
    group = _remember(Group(_lib.new_handle("mccl_comm_join", _runtime_handle(), _text(handle, "handle"),
                                            int(rank))))
    with _lock:
        if _world is None:
            _world, _world_backend = group, "any"
    return group


def get_reconfigure_handle():
    """This process's handle for reconfigure() when it has no group to take
    part with (a newcomer); the same on every call."""
    global _member_handle
    with _lock:
        if _member_handle is None:
            _member_handle = _lib.text("mccl_reconfigure_handle", _runtime_handle())
        return _member_handle


def reconfigure(uuid, handles, timeout=60.0):
    """Group.reconfigure() for a newcomer, with get_reconfigure_handle()'s
    handle; the new group becomes this process's world when it has none."""
    global _world, _world_backend
    mine = get_reconfigure_handle().encode()
    uuid, array, n, ms = _reconfigure_args(uuid, handles, timeout)
    group = _remember(Group(_lib.new_handle("mccl_reconfigure", _runtime_handle(), mine, uuid, array, n, ms)))
    with _lock:
        if _world is None:
            _world, _world_backend = group, "any"
    return group


def _text(value, what):
    if not isinstance(value, str):
        raise InvalidArgumentError(f"mccl.distributed: {what} must be a str, not {type(value).__name__}")
    return value.encode()


def _reconfigure_args(uuid, handles, timeout):
    handles = [_text(h, "each reconfigure handle") for h in handles]
    array = (ctypes.c_char_p * len(handles))(*handles) if handles else None
    ms = int(round(float(timeout) * 1000))
    return _text(str(uuid), "uuid"), array, len(handles), ms


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


def _rows_dividing(src, g, op):
    """The length of `src`'s first axis, which must divide by the group size."""
    rows = src.shape[0] if src.shape else 1
    if rows % g.size() != 0:
        raise InvalidArgumentError(f"mccl: {op} on rank {g.rank()}: the first axis ({rows}) "
                                   f"does not divide by the group size {g.size()}")
    return rows


def sum_scatter(x, *, group=None, stream=None):
    """The sum over the group, split along the first axis: rank r gets the
    r-th of size() equal slices. The first axis must divide by size()."""
    return sum_scatter_async(x, group=group).wait()


def sum_scatter_async(x, *, group=None):
    g = _group(group)
    src = _Buffer(x, "sum_scatter")
    rows = _rows_dividing(src, g, "sum_scatter")
    out = src.empty((rows // g.size(),) + tuple(src.shape[1:]))
    return _issue("mccl_reduce_scatter", g, (src.ptr, out.ptr, out.count, src.code, _SUM), out, src)


def all_to_all(x, *, group=None, stream=None):
    """`x` split along the first axis into size() equal blocks; block j goes
    to rank j, and the result holds the blocks received, in rank order (same
    shape as `x`). The first axis must divide by size()."""
    return all_to_all_async(x, group=group).wait()


def all_to_all_async(x, *, group=None):
    g = _group(group)
    src = _Buffer(x, "all_to_all")
    _rows_dividing(src, g, "all_to_all")
    out = src.empty()
    return _issue("mccl_alltoall", g, (src.ptr, out.ptr, src.count // g.size(), src.code), out, src)


def broadcast(x, root=0, *, group=None, stream=None):
    """Rank `root`'s `x` on every rank (a new array of x's shape and dtype;
    the others' `x` only gives the shape and dtype)."""
    return broadcast_async(x, root, group=group).wait()


def broadcast_async(x, root=0, *, group=None):
    g = _group(group)
    root = int(root)
    if not 0 <= root < g.size():
        raise InvalidArgumentError(f"mccl: broadcast on rank {g.rank()}: root {root} is not a rank "
                                   f"of this group of {g.size()}")
    src = _Buffer(x, "broadcast")
    out = src.empty()
    return _issue("mccl_broadcast", g, (src.ptr, out.ptr, src.count, src.code, root), out, src)


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
            if code is None and _is_numpy_bfloat16(x.dtype):
                code = _BFLOAT16
            if code is None:
                raise InvalidArgumentError(
                    f"mccl: {op}: numpy dtype {x.dtype} is not supported; use one of "
                    + ", ".join(str(d) for d in _NUMPY_DTYPES) + " or ml_dtypes.bfloat16")
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


def _is_numpy_bfloat16(dtype):
    """ml_dtypes.bfloat16 (what JAX and numpy users hold bfloat16 in); it
    is only looked up when a dtype is not one of numpy's own."""
    ml_dtypes = __import__("sys").modules.get("ml_dtypes")
    if ml_dtypes is None and dtype.name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            return False
    return ml_dtypes is not None and dtype == np.dtype(ml_dtypes.bfloat16)


def _is_torch_tensor(x):
    torch = __import__("sys").modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _torch_dtypes():
    import torch
    codes = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3,
             torch.int8: 4, torch.uint8: 5, torch.int32: 6, torch.int64: 7, torch.bool: 8,
             torch.int16: 9}
    # torch's unsigned types beyond uint8 exist from torch 2.3.
    for name, code in (("uint16", 10), ("uint32", 11), ("uint64", 12)):
        if hasattr(torch, name):
            codes[getattr(torch, name)] = code
    return codes


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
    global _runtime, _world, _world_backend
    with _lock:
        while _groups:
            _groups.pop()._close()
        _world = _world_backend = None
        if _runtime is not None:
            _lib.lib.mccl_runtime_destroy(_runtime)
            _runtime = None
