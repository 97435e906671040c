"""MLX-Swift's and MLX-C's distributed names and what they are in mccl: the
C API symbol (in libmccl as loaded) and the Python name (resolved in the
package), so the mapping in the docs for MLX users cannot name something
that is not there. The docs' table must list every Swift name."""

import ctypes
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))

# Swift name -> (MLX-C name, mccl C API functions, mccl Python name).
SWIFT_NAMES = {
    "allSum": ("mlx_distributed_all_sum", ["mccl_allreduce"], "mccl.distributed.all_sum"),
    "allGather": ("mlx_distributed_all_gather", ["mccl_allgather"], "mccl.distributed.all_gather"),
    "allMax": ("mlx_distributed_all_max", ["mccl_allreduce"], "mccl.distributed.all_max"),
    "allMin": ("mlx_distributed_all_min", ["mccl_allreduce"], "mccl.distributed.all_min"),
    "sumScatter": ("mlx_distributed_sum_scatter", ["mccl_reduce_scatter"],
                   "mccl.distributed.sum_scatter"),
    "send": ("mlx_distributed_send", ["mccl_send"], "mccl.distributed.send"),
    "recv": ("mlx_distributed_recv", ["mccl_recv"], "mccl.distributed.recv"),
    "recvLike": ("mlx_distributed_recv_like", ["mccl_recv"], "mccl.distributed.recv_like"),
    "split": ("mlx_distributed_group_split", ["mccl_comm_split"], "mccl.distributed.Group.split"),
    "DistributedGroup": ("mlx_distributed_group", ["mccl_comm_from_env", "mccl_comm_rank",
                                                   "mccl_comm_size", "mccl_comm_destroy"],
                         "mccl.distributed.Group"),
    "averageGradients": (None, ["mccl_allreduce"], "mccl.nn.average_gradients"),
    "sumGradients": (None, ["mccl_allreduce"], "mccl.nn.sum_gradients"),
}
DOCS = [os.path.join(ROOT, "docs", "mlx.md")]


def resolve(dotted):
    import importlib
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


class SwiftNamesTest(unittest.TestCase):
    def test_c_symbols_exist(self):
        from mccl import _lib
        for swift, (_, symbols, _) in SWIFT_NAMES.items():
            for symbol in symbols:
                with self.subTest(swift=swift, symbol=symbol):
                    self.assertTrue(hasattr(_lib.lib, symbol), f"{symbol} is not in libmccl")

    def test_python_names_resolve(self):
        for swift, (_, _, python) in SWIFT_NAMES.items():
            with self.subTest(swift=swift):
                try:
                    obj = resolve(python)
                except ImportError:
                    if python.startswith("mccl.nn") and not _has_torch():
                        self.fail(f"{python} needs torch, which is not installed")
                    raise
                self.assertTrue(callable(obj), python)

    def test_docs_list_every_swift_name(self):
        texts = [open(p).read() for p in DOCS if os.path.exists(p)]
        self.assertTrue(texts, f"none of {DOCS} exists")
        for swift, (c_name, symbols, python) in SWIFT_NAMES.items():
            with self.subTest(swift=swift):
                row = [line for text in texts for line in text.splitlines()
                       if line.startswith(f"| `{swift}")]
                self.assertTrue(row, f"no table row for {swift}")
                self.assertTrue(all(s in row[0] for s in symbols), row[0])
                self.assertIn(python.replace("mccl.distributed.", "md.").replace("mccl.nn.", "mnn."),
                              row[0])


def _has_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


if __name__ == "__main__":
    unittest.main()
