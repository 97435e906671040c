"""mccl.distributed: numpy arrays across ranks without torch, the way MLX's
mx.distributed works. Worlds 1-4, every numpy dtype mccl supports, async
forms, split, errors with their C++ codes, MLX's launch variables, and torch
CPU tensors when torch is there."""

import os
import subprocess
import sys
import unittest

import numpy as np

import array_harness as harness

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int32, np.int64, np.bool_,
          np.int16, np.uint16, np.uint32, np.uint64]


def contribution(rank, shape, dtype):
    """Rank r's array: small values, exact in every dtype and in sums of 4."""
    n = int(np.prod(shape))
    unsigned = dtype is np.bool_ or np.issubdtype(dtype, np.unsignedinteger)
    values = (np.arange(n) * 7 + rank * 3) % 11 - (0 if unsigned else 5)
    if dtype is np.bool_:
        values = (values + rank) % 3 == 0
    return values.reshape(shape).astype(dtype)


def expected(world, shape, dtype, how):
    stack = np.stack([contribution(r, shape, dtype) for r in range(world)])
    if how == "sum":
        return np.logical_or.reduce(stack) if dtype is np.bool_ else stack.sum(axis=0).astype(dtype)
    return stack.max(axis=0) if how == "max" else stack.min(axis=0)


def every_op(dtypes):
    """On every rank: each op with each dtype, compared element by element."""
    from mccl import distributed as md
    g = md.init()
    assert md.init() is g, "a second init() returns the same group"
    rank, world = g.rank(), g.size()
    checked = 0
    for dtype in dtypes:
        dtype = np.dtype(dtype).type
        shape = (world * 2, 3)
        x = contribution(rank, shape, dtype)
        before = x.copy()
        for how, op in (("sum", md.all_sum), ("max", md.all_max), ("min", md.all_min)):
            got = op(x)
            want = expected(world, shape, dtype, how)
            assert got.dtype == x.dtype and got.shape == x.shape, (how, dtype, got.dtype, got.shape)
            np.testing.assert_array_equal(got, want, err_msg=f"all_{how} {dtype.__name__}")
            checked += 1
        np.testing.assert_array_equal(x, before, err_msg="inputs are not changed")

        gathered = md.all_gather(x)
        np.testing.assert_array_equal(
            gathered, np.concatenate([contribution(r, shape, dtype) for r in range(world)]),
            err_msg=f"all_gather {dtype.__name__}")
        scattered = md.sum_scatter(x)
        rows = shape[0] // world
        np.testing.assert_array_equal(scattered, expected(world, shape, dtype, "sum")[rank * rows:(rank + 1) * rows],
                                      err_msg=f"sum_scatter {dtype.__name__}")

        if world > 1:  # a ring of point-to-point messages
            right, left = (rank + 1) % world, (rank - 1) % world
            incoming = md.recv_async(shape, dtype, left)
            assert md.send(x, right) is x
            np.testing.assert_array_equal(incoming.wait(), contribution(left, shape, dtype))
            pending = md.recv_like_async(x, left)
            md.send_async(x, right).wait()
            np.testing.assert_array_equal(pending.wait(), contribution(left, shape, dtype))
        checked += 4

    # Async collectives overlap; each result comes back from its own handle.
    a = md.all_sum_async(np.full(1000, rank + 1, np.float32))
    b = md.all_max_async(np.full(3, rank, np.int64))
    assert b.wait().tolist() == [world - 1] * 3
    assert a.wait()[0] == world * (world + 1) / 2 and a.is_completed()
    # A scalar and a non-contiguous view.
    assert md.all_sum(np.float64(rank)) == world * (world - 1) / 2
    strided = np.arange(20, dtype=np.int32)[::2]
    np.testing.assert_array_equal(md.all_sum(strided), strided * world)
    md.barrier()
    return checked


def split_groups():
    from mccl import distributed as md
    g = md.init()
    rank = g.rank()
    sub = g.split(rank % 2)
    members = [r for r in range(g.size()) if r % 2 == rank % 2]
    assert sub.size() == len(members) and sub.rank() == members.index(rank), (sub.size(), sub.rank())
    total = md.all_sum(np.array([rank], np.int64), group=sub)
    assert total[0] == sum(members), (total, members)
    backwards = g.split(0, key=g.size() - rank)
    assert backwards.rank() == g.size() - 1 - rank
    assert g.split(-1 if rank == 0 else 1) is None or rank != 0
    return sub.size()


def revoke_then_shrink_and_split():
    """Rank 1 revokes while the others wait inside a large and a small
    all_sum it never issues: each fails with RevokedError naming rank 1 (the
    time is the wall clock, comparable across the ranks of one host); later
    ops fail the same way at once; shrink without rank 3 and split by parity
    give groups with correct sums."""
    import time
    import mccl
    from mccl import distributed as md
    g = md.init()
    rank, world = g.rank(), g.size()
    out = {"failures": []}
    md.all_sum(np.ones(1, np.float32))  # everyone is here
    out["revoked_before"] = g.revoked()
    if rank == 1:
        time.sleep(0.3)  # the others are inside their ops by now
        out["revoked_at"] = time.time()
        g.revoke("python test revokes")
    else:
        large = md.all_sum_async(np.ones(1 << 20, np.float32))
        for work in (md.all_sum_async(np.ones(4, np.float32)), large):
            try:
                work.wait(timeout=20)
                out["failures"].append(None)
            except mccl.MCCLError as e:
                out["failures"].append((type(e).__name__, e.code, str(e), time.time()))
    try:
        md.all_sum(np.ones(4, np.float32))
        out["later"] = None
    except mccl.MCCLError as e:
        out["later"] = (type(e).__name__, e.code, str(e))
    out["revoked_after"] = g.revoked()
    if rank != 3:
        small = g.shrink([3])
        out["shrunk"] = (small.size(), int(md.all_sum(np.array([rank + 1], np.int64), group=small)[0]))
    # Rank 0 serves the store this split meets in and returns (and exits)
    # right after it: the split must keep it until every rank is done with it.
    half = g.split(rank % 2)
    out["split"] = (half.size(), int(md.all_sum(np.array([rank + 1], np.int64), group=half)[0]))
    return out


def errors_carry_codes():
    import mccl
    from mccl import distributed as md
    g = md.init()
    out = {}
    for name, call in (
            ("dtype", lambda: md.all_sum(np.ones(3, np.complex64))),
            ("scatter", lambda: md.sum_scatter(np.ones(g.size() * 2 + 1, np.float32))),
            ("peer", lambda: md.send(np.ones(1), g.size())),
            ("self", lambda: md.send(np.ones(1), g.rank())),
            ("kind", lambda: md.all_sum([1, 2, 3]))):
        try:
            call()
            out[name] = None
        except mccl.MCCLError as e:
            out[name] = (type(e).__name__, e.code, str(e))
    # A receive of the wrong size fails with the C++ error code, naming both sizes.
    if g.rank() == 0:
        md.send(np.ones(4, np.float32), 1)
    elif g.rank() == 1:
        try:
            md.recv((5,), np.float32, 0)
            out["size"] = None
        except mccl.MCCLError as e:
            out["size"] = (type(e).__name__, e.code, str(e))
    return out


def group_of_one():
    """Alone: a group of one whose ops return copies."""
    from mccl import distributed as md
    import mccl
    g = md.init()
    for dtype in DTYPES:
        x = contribution(0, (2, 3), dtype)
        results = [md.all_sum(x), md.all_max(x), md.all_min(x), md.all_gather(x), md.sum_scatter(x)]
        for y in results:
            assert y.dtype == x.dtype, (y.dtype, x.dtype)
            np.testing.assert_array_equal(y, x)
            assert y is not x and not np.shares_memory(x, y)
    return g.rank(), g.size(), mccl.TORCH_BACKEND


def launched_by_mlx():
    from mccl import distributed as md
    g = md.init(strict=True)
    total = md.all_sum(np.array([g.rank() + 1], np.int32))
    return g.rank(), g.size(), int(total[0])


def torch_tensors():
    import torch
    from mccl import distributed as md
    g = md.init()
    world, rank = g.size(), g.rank()
    out = {}
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.float16):
        x = torch.full((4, 2), rank + 1, dtype=dtype)
        y = md.all_sum(x)
        assert isinstance(y, torch.Tensor) and y.dtype == dtype, (type(y), y.dtype)
        out[str(dtype)] = y.float().tolist()[0][0]
    gathered = md.all_gather(torch.tensor([rank], dtype=torch.int32))
    assert gathered.tolist() == list(range(world))
    # mccl.nn takes an mccl.distributed group as well as a torch one.
    import mccl.nn as mnn
    x = torch.ones(3, requires_grad=True)
    (mnn.sum_gradients(g)(x) * (rank + 1)).sum().backward()
    out["sum_gradients"] = x.grad.tolist()
    averaged = mnn.average_gradients({"w": torch.full((2,), float(rank))}, group=g)
    out["average_gradients"] = averaged["w"].tolist()
    return out


class ArrayApiTest(unittest.TestCase):

    def test_import_without_torch_and_group_of_one(self):
        rank, size, torch_backend = harness.run(group_of_one, 1, env=lambda r: {})[0]
        self.assertEqual((rank, size, torch_backend), (0, 1, False))

    def test_strict_without_a_launcher_fails_naming_what_is_missing(self):
        code = ("import sys; sys.modules['torch'] = None\n"
                "import mccl\nfrom mccl import distributed as md\n"
                "try:\n    md.init(strict=True)\nexcept mccl.InvalidConfigError as e:\n"
                "    print('refused', e.code, e)\n")
        env = {k: v for k, v in os.environ.items()
               if k not in ("RANK", "WORLD_SIZE", "MLX_RANK", "MASTER_ADDR", "MASTER_PORT")}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=60)
        self.assertIn("refused 1", out.stdout, out.stderr)
        self.assertIn("RANK", out.stdout)
        self.assertIn("MLX_HOSTFILE", out.stdout)

    def test_every_op_and_dtype_on_worlds_2_to_4(self):
        for world in (2, 3, 4):
            with self.subTest(world=world):
                checked = harness.run(every_op, world, args=(DTYPES,))
                self.assertEqual(checked, [len(DTYPES) * 7] * world)

    def test_split(self):
        self.assertEqual(harness.run(split_groups, 4), [2, 2, 2, 2])

    def test_revoke_fails_waiting_ops_and_shrink_and_split_still_work(self):
        results = harness.run(revoke_then_shrink_and_split, 4)
        revoked_at = results[1]["revoked_at"]
        worst = 0.0
        for rank, out in enumerate(results):
            with self.subTest(rank=rank):
                if rank != 1:
                    self.assertEqual(len(out["failures"]), 2)
                    for failure in out["failures"]:
                        self.assertIsNotNone(failure, "an op rank 1 never issued completed")
                        name, code, message, at = failure
                        self.assertEqual((name, code), ("RevokedError", 14), message)
                        self.assertIn("revoked by rank 1: python test revokes", message)
                        worst = max(worst, at - revoked_at)
                self.assertEqual((out["revoked_before"], out["revoked_after"]), (False, True))
                name, code, message = out["later"]
                self.assertEqual((name, code), ("RevokedError", 14), message)
                self.assertIn("allreduce", message)
                self.assertIn("revoked by rank 1", message)
                if rank != 3:
                    self.assertEqual(out["shrunk"], (3, 1 + 2 + 3))
                self.assertEqual(out["split"], (2, 1 + 3 if rank % 2 == 0 else 2 + 4))
        print(f"revoke through mccl.distributed: every waiting op failed within {worst * 1000:.1f} ms")
        self.assertLess(worst, 2.0)

    def test_errors_are_mccl_exceptions_with_codes(self):
        results = harness.run(errors_carry_codes, 2)
        for out in results:
            self.assertEqual(out["dtype"][:2], ("InvalidArgumentError", 2))
            self.assertIn("complex64", out["dtype"][2])
            self.assertEqual(out["scatter"][:2], ("InvalidArgumentError", 2))
            self.assertIn("does not divide", out["scatter"][2])
            self.assertEqual(out["peer"][:2], ("InvalidArgumentError", 2))
            self.assertEqual(out["self"][:2], ("InvalidArgumentError", 2))
            self.assertEqual(out["kind"][:2], ("InvalidArgumentError", 2))
        name, code, message = results[1]["size"]
        self.assertTrue(code in (2, 10), (name, code, message))  # invalid_argument or protocol_error
        self.assertIn("16", message)  # the sizes, in bytes
        self.assertIn("20", message)

    def test_mlx_ring_hostfile_forms_the_group(self):
        with harness.temp_dir() as d:
            env = harness.mlx_ring_env(3, d)
            results = harness.run(launched_by_mlx, 3, env=env)
        self.assertEqual(results, [(r, 3, 6) for r in range(3)])

    def test_jaccl_variables_describe_the_mesh_and_fall_back_to_tcp(self):
        """mlx.launch --backend jaccl: MLX_IBV_DEVICES and MLX_JACCL_COORDINATOR
        form the group; MLX_RING_VERBOSE=1 logs at INFO. This machine has no
        RDMA device, so the ranks say why and run over TCP."""
        code = ("import sys; sys.modules['torch'] = None\n"
                "import numpy as np\nfrom mccl import distributed as md\n"
                "g = md.init(strict=True)\n"
                "print('sum', int(md.all_sum(np.array([g.rank() + 1]))[0]), g.size())\n")
        with harness.temp_dir() as d:
            devices = os.path.join(d, "devices.json")
            with open(devices, "w") as f:
                f.write('[[null, "rdma_en2"], ["rdma_en3", null]]')
            port = harness.free_port()
            procs = []
            for rank in range(2):
                env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
                env.update(MLX_RANK=str(rank), MLX_IBV_DEVICES=devices, MLX_RING_VERBOSE="1",
                           MLX_JACCL_COORDINATOR=f"127.0.0.1:{port}")
                procs.append(subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE))
            outs = []
            try:
                for p in procs:
                    outs.append(p.communicate(timeout=90))
            finally:
                for p in procs:
                    p.kill()
        for rank, (out, err) in enumerate(outs):
            self.assertIn("sum 3 2", out, err)
            self.assertIn("falling back to TCP", err)
        self.assertIn("peer 1 via rdma_en2", outs[0][1])
        self.assertIn("peer 0 via rdma_en3", outs[1][1])

    def test_torch_cpu_tensors(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("torch is not installed")  # the numpy API is what is tested then
        results = harness.run(torch_tensors, 2, block_torch=False)
        for out in results:
            self.assertEqual(out, {"torch.float32": 3.0, "torch.bfloat16": 3.0, "torch.int64": 3.0,
                                   "torch.float16": 3.0, "sum_gradients": [3.0, 3.0, 3.0],
                                   "average_gradients": [0.5, 0.5]})


if __name__ == "__main__":
    unittest.main()
