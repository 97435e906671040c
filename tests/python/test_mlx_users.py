"""MLX users' code as they write it, on 1-3 spawned ranks: group=None in
mccl.nn means the group md.init() made (an error where the launcher says
there is company but no group was made), every reduction of the dtypes
numpy has beyond mccl's first ones checked against numpy, bfloat16 through
ml_dtypes, all_to_all and broadcast, init() with MLX's other backend names,
and integer leaves in average_gradients."""

import os
import subprocess
import sys
import unittest

import numpy as np

import array_harness as harness

NEW_DTYPES = [np.int16, np.uint16, np.uint32, np.uint64]
# mccl_redop_t: sum prod min max avg band bor bxor.
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4, "band": 5, "bor": 6, "bxor": 7}
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "MLX_RANK", "MLX_HOSTFILE",
                 "MLX_JACCL_COORDINATOR", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")


def values(rank, dtype, n=64):
    """Rank r's array: the full range of the dtype (extremes included), so
    sums and products wrap."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(1000 + rank)
    x = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
    x[:4] = [info.min, info.max, 0, 1]
    return x


def numpy_reference(op, stack, dtype):
    world = stack.shape[0]
    with np.errstate(over="ignore"):
        if op == "sum":
            return np.add.reduce(stack, axis=0, dtype=dtype)
        if op == "prod":
            return np.multiply.reduce(stack, axis=0, dtype=dtype)
        if op == "avg":  # the wrapped sum, divided truncating toward zero
            total = np.add.reduce(stack, axis=0, dtype=dtype)
            wide = total.astype(object)
            return np.array([v // world if v >= 0 else -(-v // world) for v in wide],
                            dtype=dtype)
    return {"min": np.minimum, "max": np.maximum, "band": np.bitwise_and,
            "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op].reduce(stack, axis=0)


def every_reduction_of_the_new_dtypes():
    from mccl import distributed as md
    g = md.init()
    checked = []
    for dtype in NEW_DTYPES:
        x = values(g.rank(), dtype)
        stack = np.stack([values(r, dtype) for r in range(g.size())])
        for name, code in OPS.items():
            got = md._allreduce(x, code, None).wait()
            want = numpy_reference(name, stack, dtype)
            assert got.dtype == np.dtype(dtype), (name, got.dtype)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {np.dtype(dtype).name}")
            checked.append(f"{name}/{np.dtype(dtype).name}")
    return checked


def bfloat16_and_new_ops():
    import ml_dtypes
    from mccl import distributed as md
    g = md.init()
    rank, world = g.rank(), g.size()
    bf = ml_dtypes.bfloat16
    x = (np.arange(6) + rank).astype(bf).reshape(3, 2)  # small integers: exact in bfloat16
    out = {"dtype": str(md.all_sum(x).dtype)}
    out["sum"] = md.all_sum(x).astype(np.float32).tolist()
    out["max"] = md.all_max(x).astype(np.float32).tolist()
    out["gather"] = md.all_gather(x).astype(np.float32)[:, 0].tolist()
    # all_to_all: row block j of rank r goes to rank j; block r of the result came from r.
    rows = np.array([[100 * rank + j] for j in range(world)], np.int32)
    out["all_to_all"] = md.all_to_all(rows)[:, 0].tolist()
    out["all_to_all_uint64"] = md.all_to_all(rows.astype(np.uint64))[:, 0].tolist()
    # broadcast: the root's array everywhere, any root.
    out["broadcast"] = [md.broadcast(np.full(3, 10 * rank + root, np.uint16), root).tolist()
                        for root in range(world)]
    work = md.broadcast_async(np.array([rank], np.int16), root=world - 1)
    out["broadcast_async"] = work.wait().tolist()
    return out


def init_backend_mismatch():
    import mccl
    from mccl import distributed as md
    g = md.init(backend="ring")
    same = md.init() is g and md.init(backend="ring") is g
    try:
        md.init(backend="jaccl")
        return same, None
    except mccl.InvalidArgumentError as e:
        return same, str(e)


def group_none_after_init():
    """What mccl.nn does with group=None once md.init() has run."""
    import torch
    import mccl.nn as mnn
    from mccl import distributed as md
    g = md.init()
    rank, world = g.rank(), g.size()
    out = {}
    grads = {"w": torch.full((2, 2), float(rank)), "b": [torch.tensor([rank * 2.0]), None]}
    avg = mnn.average_gradients(grads)
    out["average"] = [avg["w"].tolist(), avg["b"][0].tolist(), avg["b"][1]]
    out["grads_kept"] = grads["w"].tolist()
    # sum_gradients: identity forward, summed gradient backward.
    x = torch.ones(3, requires_grad=True)
    (mnn.sum_gradients()(x) * (rank + 1)).sum().backward()
    out["sum_gradients"] = x.grad.tolist()
    # shard_linear: this rank's rows, and the column-parallel/row-parallel pair
    # gives the unsharded layer's output.
    torch.manual_seed(0)
    up, down = torch.nn.Linear(4, 8), torch.nn.Linear(8, 4)
    up_s = mnn.shard_linear(up, "all-to-sharded")
    down_s = mnn.shard_linear(down, "sharded-to-all")
    out["up_shape"] = list(up_s.weight.shape)
    out["up_rows"] = torch.equal(up_s.weight, up.weight[rank * 8 // world:(rank + 1) * 8 // world])
    inp = torch.arange(8.0).reshape(2, 4)
    out["mlp_matches"] = torch.allclose(down_s(up_s(inp)), down(up(inp)), atol=1e-5)
    # Integer leaves: exact sum, truncating division; bool leaves: refused by name.
    ints = mnn.average_gradients({"steps": torch.tensor([rank * 3 + 1, -rank * 3 - 1], dtype=torch.int32)})
    out["int_average"] = (str(ints["steps"].dtype), ints["steps"].tolist())
    try:
        mnn.average_gradients({"mask": torch.tensor([True])})
        out["bool"] = None
    except TypeError as e:
        out["bool"] = str(e)
    return out


def group_none_without_init():
    import mccl.nn as mnn
    import torch
    try:
        mnn.average_gradients({"w": torch.ones(2)})
        return None
    except ValueError as e:
        return str(e)


def alone_script(body):
    """Runs `body` in a fresh interpreter with no launcher variables."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    code = "import mccl\nfrom mccl import distributed as md\n" + body
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)
    return done.returncode, done.stdout, done.stderr


class NewDtypesTest(unittest.TestCase):
    def test_every_reduction_of_int16_uint16_uint32_uint64_matches_numpy(self):
        for world in (2, 3):
            with self.subTest(world=world):
                results = harness.run(every_reduction_of_the_new_dtypes, world)
                for checked in results:
                    self.assertEqual(len(checked), len(NEW_DTYPES) * len(OPS), checked)

    def test_bfloat16_all_to_all_and_broadcast(self):
        try:
            import ml_dtypes  # noqa: F401
        except ImportError:
            self.fail("ml_dtypes is needed for this test (pip install ml_dtypes)")
        world = 3
        results = harness.run(bfloat16_and_new_ops, world)
        for rank, out in enumerate(results):
            self.assertEqual(out["dtype"], "bfloat16")
            self.assertEqual(out["sum"], [[float(3 * (2 * i + j) + 3) for j in range(2)]
                                          for i in range(3)])
            self.assertEqual(out["max"], [[float(2 * i + j + 2) for j in range(2)] for i in range(3)])
            self.assertEqual(out["gather"], [float(r + 2 * i) for r in range(world) for i in range(3)])
            self.assertEqual(out["all_to_all"], [100 * r + rank for r in range(world)])
            self.assertEqual(out["all_to_all_uint64"], [100 * r + rank for r in range(world)])
            self.assertEqual(out["broadcast"], [[10 * root + root] * 3 for root in range(world)])
            self.assertEqual(out["broadcast_async"], [world - 1])

    def test_unsupported_dtype_names_the_supported_ones(self):
        code, out, err = alone_script(
            "import numpy as np\ntry:\n    md.all_sum(np.ones(2, np.complex64))\n"
            "except mccl.InvalidArgumentError as e:\n    print(e)\n")
        self.assertEqual(code, 0, err)
        for name in ("complex64", "int16", "uint64", "bfloat16"):
            self.assertIn(name, out)


class InitTest(unittest.TestCase):
    def test_init_with_another_backend_after_init_is_refused(self):
        for same, message in harness.run(init_backend_mismatch, 2):
            self.assertTrue(same)
            self.assertIsNotNone(message, "init(backend='jaccl') after a ring init() returned a group")
            self.assertIn("'ring'", message)
            self.assertIn("'jaccl'", message)

    def test_mpi_and_nccl_alone_are_a_group_of_one_and_strict_raises(self):
        for backend in ("mpi", "nccl"):
            with self.subTest(backend=backend):
                code, out, err = alone_script(
                    f"g = md.init(backend={backend!r})\nprint(g.rank(), g.size())\n"
                    f"try:\n    md.init(strict=True, backend={backend!r})\n"
                    "except mccl.InvalidArgumentError as e:\n    print('strict:', e)\n")
                self.assertEqual(code, 0, err)
                lines = out.splitlines()
                self.assertEqual(lines[0], "0 1")
                self.assertIn(f"strict: mccl.distributed.init(backend='{backend}', strict=True)", out)

    def test_mpi_in_a_launched_job_is_refused(self):
        code, out, err = alone_script(
            "import os\nos.environ.update(OMPI_COMM_WORLD_SIZE='4')\n"
            "try:\n    md.init(backend='mpi')\nexcept mccl.InvalidArgumentError as e:\n    print(e)\n")
        self.assertEqual(code, 0, err)
        self.assertIn("one of 4 ranks", out)
        self.assertIn("OMPI_COMM_WORLD_SIZE=4", out)


class GroupNoneTest(unittest.TestCase):
    def test_group_none_is_the_group_init_made(self):
        world = 2
        results = harness.run(group_none_after_init, world, block_torch=False)
        for rank, out in enumerate(results):
            self.assertEqual(out["average"], [[[0.5, 0.5], [0.5, 0.5]], [1.0], None])
            self.assertEqual(out["grads_kept"], [[float(rank)] * 2] * 2)
            self.assertEqual(out["sum_gradients"], [3.0, 3.0, 3.0])
            self.assertEqual(out["up_shape"], [4, 4])
            self.assertTrue(out["up_rows"])
            self.assertTrue(out["mlp_matches"])
            # Sums 1 + 4 = 5 and -5: 5 / 2 truncates to 2 and -2.
            self.assertEqual(out["int_average"], ("torch.int32", [2, -2]))
            self.assertIn("torch.bool", out["bool"])

    def test_group_none_in_a_launched_job_without_init_raises(self):
        results = harness.run(group_none_without_init, 2, block_torch=False)
        for message in results:
            self.assertIsNotNone(message, "group=None worked on a group of one in a 2-rank job")
            self.assertIn("one of 2 ranks", message)
            self.assertIn("md.init()", message)

    def test_group_none_alone_is_a_group_of_one(self):
        code, out, err = alone_script(
            "import torch, mccl.nn as mnn\ng = {'w': torch.ones(2)}\n"
            "print(mnn.average_gradients(g) is g)\n"
            "print(list(mnn.shard_linear(torch.nn.Linear(4, 8), 'all-to-sharded').weight.shape))\n")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.split(), ["True", "[8,", "4]"])


if __name__ == "__main__":
    unittest.main()
