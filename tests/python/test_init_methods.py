"""init_process_group("mccl") through each init method torch offers:
file://, tcp:// and env://. mccl rendezvouses through the store torch
builds from it and needs no port of its own. And the way out:
destroy_process_group while ops nobody holds are still completing."""

import os
import tempfile
import unittest

import harness


def allreduce_ranks(rank, world):
    import torch
    import torch.distributed as dist
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    return t.item()


def cycles_dropping_async_ops(rank, world, store_dir, cycles):
    """Each cycle: a group, an async allreduce whose Work and tensor Python
    drops at once, and destroy_process_group while the op may still be
    completing on mccl's op thread. The last reference to such a Work (and
    to its tensor, whose Python object then needs the GIL to be freed) must
    never be dropped on that thread: destroy holds the GIL while it joins it."""
    import datetime
    import torch
    import torch.distributed as dist
    for c in range(cycles):
        dist.init_process_group("mccl", rank=rank, world_size=world,
                                init_method="file://" + os.path.join(store_dir, f"store{c}"),
                                timeout=datetime.timedelta(seconds=30))
        t = torch.ones(1 << (14 + c % 8))
        dist.all_reduce(t, async_op=True)
        del t
        dist.destroy_process_group()
    return cycles


class InitMethodsTest(unittest.TestCase):
    def check(self, init):
        self.assertEqual(harness.run_ranks(allreduce_ranks, 2, init=init, deadline=60), [3.0, 3.0])

    def test_file(self):
        self.check("file")

    def test_tcp(self):
        self.check("tcp")

    def test_env(self):
        self.check("env")

    def test_destroy_while_dropped_async_ops_complete(self):
        cycles = 24
        with tempfile.TemporaryDirectory(prefix="mccl-pytest-") as d:
            self.assertEqual(harness.run_ranks(cycles_dropping_async_ops, 2, d, cycles,
                                               backend=None, deadline=90), [cycles, cycles])


if __name__ == "__main__":
    unittest.main()
