"""libmccl through its C API (include/mccl/mccl.h) with ctypes: the one way
the Python package reaches mccl without torch. Calls release the GIL while
in C (ctypes.CDLL does), so a blocking collective never stalls other Python
threads. Every status other than MCCL_OK raises the matching mccl.errors class
with the C API's last-error message.
"""

import ctypes
import os

from . import errors
from ._libpath import LIBMCCL

C_API_VERSION = 1  # MCCL_C_API_VERSION this package was written for

_path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBMCCL))
lib = ctypes.CDLL(_path)

status = ctypes.c_int
handle = ctypes.c_void_p
size_t = ctypes.c_size_t
_cstr_p = ctypes.POINTER(ctypes.c_char_p)


class CommOptions(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int), ("world_size", ctypes.c_int),
                ("master_addr", ctypes.c_char_p), ("master_port", ctypes.c_int),
                ("comm_id", ctypes.c_uint32)]


def _declare(name, *argtypes, restype=status):
    fn = getattr(lib, name)
    fn.argtypes = list(argtypes)
    fn.restype = restype
    return fn


_p = ctypes.c_void_p
_out = ctypes.POINTER(ctypes.c_void_p)
_int_p = ctypes.POINTER(ctypes.c_int)
_sizes = ctypes.POINTER(ctypes.c_size_t)
_i, _u32 = ctypes.c_int, ctypes.c_uint32

_declare("mccl_c_api_version", restype=ctypes.c_uint32)
_declare("mccl_version", restype=ctypes.c_char_p)
_declare("mccl_last_error", restype=ctypes.c_char_p)
_declare("mccl_set_setting", ctypes.c_char_p, ctypes.c_char_p)
_declare("mccl_clear_settings")
_declare("mccl_setting_count", restype=size_t)
_declare("mccl_setting_info", size_t, _cstr_p, _cstr_p, _cstr_p, _cstr_p)
_declare("mccl_explicit_settings", _cstr_p)
_declare("mccl_describe_settings", _cstr_p)
_declare("mccl_runtime_create", _out)
_declare("mccl_runtime_destroy", handle)
_declare("mccl_comm_create", handle, ctypes.POINTER(CommOptions), _out)
_declare("mccl_comm_from_env", handle, _i, _out)
_declare("mccl_comm_rank", handle, _int_p)
_declare("mccl_comm_size", handle, _int_p)
_declare("mccl_comm_split", handle, _i, _i, _out)
_declare("mccl_comm_shrink", handle, _int_p, size_t, _out)
_declare("mccl_comm_abort", handle, ctypes.c_char_p)
_declare("mccl_comm_revoke", handle, ctypes.c_char_p)
_declare("mccl_comm_revoked", handle, _int_p)
_declare("mccl_comm_grow_handle", handle, _i, _cstr_p)
_declare("mccl_comm_grow", handle, ctypes.c_char_p, _out)
_declare("mccl_comm_join", handle, ctypes.c_char_p, _i, _out)
_declare("mccl_comm_reconfigure_handle", handle, _cstr_p)
_declare("mccl_reconfigure_handle", handle, _cstr_p)
_declare("mccl_comm_reconfigure", handle, ctypes.c_char_p, _cstr_p, size_t, ctypes.c_int64, _out)
_declare("mccl_reconfigure", handle, ctypes.c_char_p, ctypes.c_char_p, _cstr_p, size_t, ctypes.c_int64, _out)
_declare("mccl_comm_destroy", handle)
_declare("mccl_allreduce", handle, _p, _p, size_t, _i, _i, _out)
_declare("mccl_broadcast", handle, _p, _p, size_t, _i, _i, _out)
_declare("mccl_reduce", handle, _p, _p, size_t, _i, _i, _i, _out)
_declare("mccl_allgather", handle, _p, _p, size_t, _i, _out)
_declare("mccl_allgatherv", handle, _p, _p, _sizes, _i, _out)
_declare("mccl_reduce_scatter", handle, _p, _p, size_t, _i, _i, _out)
_declare("mccl_reduce_scatterv", handle, _p, _p, _sizes, _i, _i, _out)
_declare("mccl_gather", handle, _p, _p, size_t, _i, _i, _out)
_declare("mccl_scatter", handle, _p, _p, size_t, _i, _i, _out)
_declare("mccl_alltoall", handle, _p, _p, size_t, _i, _out)
_declare("mccl_alltoallv", handle, _p, _sizes, _p, _sizes, _i, _out)
_declare("mccl_barrier", handle, _out)
_declare("mccl_send", handle, _p, size_t, _i, _i, _u32, _out)
_declare("mccl_recv", handle, _p, size_t, _i, _i, _u32, _out)
_declare("mccl_work_wait", handle)
_declare("mccl_work_wait_for", handle, ctypes.c_int64, _int_p)
_declare("mccl_work_test", handle, _int_p)
_declare("mccl_work_free", handle)
_declare("mccl_metrics_json", _cstr_p)
_declare("mccl_metrics_summary", _cstr_p)
_declare("mccl_metrics_prometheus", _i, _cstr_p)
_declare("mccl_log_metrics")
_declare("mccl_reset_metrics")

if lib.mccl_c_api_version() != C_API_VERSION:
    raise ImportError(f"mccl: {_path} has C API version {lib.mccl_c_api_version()}, "
                      f"this package needs {C_API_VERSION}: rebuild or reinstall mccl")


def check(code):
    """Raises the mccl error for a failed C call."""
    if code != 0:
        raise errors.from_code(code, (lib.mccl_last_error() or b"").decode(errors="replace"))


def call(name, *args):
    check(getattr(lib, name)(*args))


def text(name, *args):
    """Calls a C API function that hands back a string."""
    out = ctypes.c_char_p()
    check(getattr(lib, name)(*args, ctypes.byref(out)))
    return (out.value or b"").decode()


def new_handle(name, *args):
    """Calls a C API function that creates a handle; None when it made none."""
    out = ctypes.c_void_p()
    check(getattr(lib, name)(*args, ctypes.byref(out)))
    return out.value


def settings_table():
    """(MCCL_* name, default, allowed, doc) for every setting."""
    rows = []
    for i in range(lib.mccl_setting_count()):
        cells = [ctypes.c_char_p() for _ in range(4)]
        check(lib.mccl_setting_info(i, *[ctypes.byref(c) for c in cells]))
        rows.append(tuple(c.value.decode() for c in cells))
    return rows
