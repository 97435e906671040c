"""init_process_group("mccl") through each init method torch offers:
file://, tcp:// and env://. mccl rendezvouses through the store torch
builds from it and needs no port of its own."""

import unittest

import harness


def allreduce_ranks(rank, world):
    import torch
    import torch.distributed as dist
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    return t.item()


class InitMethodsTest(unittest.TestCase):
    def check(self, init):
        self.assertEqual(harness.run_ranks(allreduce_ranks, 2, init=init, deadline=60), [3.0, 3.0])

    def test_file(self):
        self.check("file")

    def test_tcp(self):
        self.check("tcp")

    def test_env(self):
        self.check("env")


if __name__ == "__main__":
    unittest.main()
