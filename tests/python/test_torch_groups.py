"""Process groups made from other groups over backend "mccl", 3 ranks, each
result checked against one computed here from every rank's input:

- dist.new_group: two overlapping subgroups (one with
  use_local_synchronization=True), collectives inside each, global and
  group ranks, the backend serving them;
- dist.split_group: torch 2.13 refuses it on a machine without an
  accelerator before any backend is asked (gloo alike); the test pins the
  error so a torch that lifts the restriction shows up here;
- dist.shrink_group after a rank is SIGKILLed: the survivors' next op
  fails naming the lost rank, they shrink the default group (rank 0 lost,
  file:// store) or a subgroup (SHRINK_ABORT, tcp:// store served by rank
  0, which survives) and run collectives in the smaller group.
"""

import os
import signal
import unittest

import harness

WORLD = 3


def new_group_ranks(rank, world):
    import torch
    import torch.distributed as dist

    report = {}
    # The first is created only by its members, the second by every rank.
    # (The other order deadlocks, gloo alike: a local-synchronization
    # group's name counts the groups its creator is in, and rank 1 is not
    # in [0, 2].)
    if rank in (1, 2):
        inner = dist.new_group([1, 2], use_local_synchronization=True)
    outer = dist.new_group([0, 2])
    if rank in (0, 2):
        t = torch.tensor([float(rank + 1), 10.0 * rank])
        dist.all_reduce(t, group=outer)
        report["outer_allreduce"] = t.tolist()
        parts = [torch.empty(2, dtype=torch.int64) for _ in range(2)]
        dist.all_gather(parts, torch.tensor([rank, rank * rank]), group=outer)
        report["outer_allgather"] = [p.tolist() for p in parts]
        b = torch.tensor([float(rank)])
        dist.broadcast(b, group_src=1, group=outer)  # group rank 1 is global rank 2
        report["outer_broadcast"] = b.item()
        report["outer_ranks"] = (dist.get_group_rank(outer, rank), outer.size(),
                                 dist.get_process_group_ranks(outer), dist.get_backend(outer))
    if rank in (1, 2):
        out = torch.empty(2)
        dist.reduce_scatter_tensor(out, torch.arange(4, dtype=torch.float32) * (rank + 1), group=inner)
        report["inner_reduce_scatter"] = out.tolist()
        report["inner_ranks"] = (dist.get_group_rank(inner, rank), inner.size(), dist.get_backend(inner))
        dist.barrier(group=inner)
    dist.barrier()
    return report


def split_group_ranks(rank, world):
    import torch
    import torch.distributed as dist
    report = {"backend_supports_splitting": dist.distributed_c10d._get_default_group()
              ._get_backend(torch.device("cpu")).supports_splitting}
    try:
        dist.split_group(split_ranks=[[0, 1], [2]])
        report["error"] = None
    except RuntimeError as e:
        report["error"] = str(e)
    return report


def _lose_rank(rank, doomed, group):
    """Every rank runs one allreduce on `group`; then `doomed` SIGKILLs
    itself and the others' next allreduce on it must fail."""
    import torch
    import torch.distributed as dist
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, group=group)
    if rank == doomed:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        dist.all_reduce(torch.ones(1), group=group)
        return t.item(), None
    except RuntimeError as e:
        return t.item(), f"{type(e).__name__}: {e}"


def shrink_default_ranks(rank, world):
    import torch
    import torch.distributed as dist
    report = {}
    report["before"], report["error"] = _lose_rank(rank, 0, None)
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    report["supports_shrinking"] = backend.supports_shrinking
    report["get_error"] = str(backend.get_error())
    group = dist.shrink_group([0])
    report["shape"] = (dist.get_rank(), dist.get_world_size(), group.rank(), group.size(),
                       dist.get_backend())
    t = torch.tensor([float(rank * 10)])
    dist.all_reduce(t)
    report["after_allreduce"] = t.item()
    parts = [torch.empty(1) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, torch.tensor([float(rank)]))
    report["after_allgather"] = [p.item() for p in parts]
    return report


def shrink_subgroup_ranks(rank, world):
    import torch
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import SHRINK_ABORT
    report = {}
    sub = dist.new_group(list(range(world)))
    report["before"], report["error"] = _lose_rank(rank, 2, sub)
    group = dist.shrink_group([2], group=sub, shrink_flags=SHRINK_ABORT)
    report["shape"] = (group.rank(), group.size(), dist.get_process_group_ranks(group))
    t = torch.tensor([float(rank + 5)])
    dist.all_reduce(t, group=group)
    report["after_allreduce"] = t.item()
    return report


class GroupsTest(unittest.TestCase):
    def test_new_group(self):
        reports = harness.run_ranks(new_group_ranks, WORLD)
        for rank in (0, 2):
            rep = reports[rank]
            self.assertEqual(rep["outer_allreduce"], [1.0 + 3.0, 0.0 + 20.0])
            self.assertEqual(rep["outer_allgather"], [[0, 0], [2, 4]])
            self.assertEqual(rep["outer_broadcast"], 2.0)
            self.assertEqual(rep["outer_ranks"], ([0, 2].index(rank), 2, [0, 2], "mccl"))
        for rank in (1, 2):
            rep = reports[rank]
            total = [float(i * 2 + i * 3) for i in range(4)]  # ranks 1 and 2: factors 2 and 3
            self.assertEqual(rep["inner_reduce_scatter"], total[2 * (rank - 1):2 * rank])
            self.assertEqual(rep["inner_ranks"], (rank - 1, 2, "mccl"))
        self.assertNotIn("inner_ranks", reports[0])
        self.assertNotIn("outer_ranks", reports[1])

    def test_split_group_is_refused_without_an_accelerator(self):
        import torch
        reports = harness.run_ranks(split_group_ranks, WORLD)
        for rep in reports:
            # mccl has no Backend::split: torch checks that only with an
            # accelerator present, where it splits every device's backend.
            self.assertFalse(rep["backend_supports_splitting"])
            if not torch.accelerator.is_available():
                self.assertEqual(rep["error"], "No device associated with the default pg, not safe "
                                               "to split any process groups")

    def test_shrink_default_group_after_rank_0_is_killed(self):
        # file://: the store outlives rank 0 (a tcp:// store would not).
        got = harness.run_ranks(shrink_default_ranks, WORLD, init="file", allow_failures=True,
                                env={"MCCL_TIMEOUT_MS": "10000"})
        self.assertFalse(got[0][0])
        self.assertIn("rank 0 exited with status -9", got[0][1])
        for rank in (1, 2):
            ok, rep = got[rank]
            self.assertTrue(ok, rep)
            self.assertEqual(rep["before"], 6.0)
            self.assertIsNotNone(rep["error"], f"rank {rank}: an allreduce with rank 0 dead passed")
            self.assertIn("lost rank 0", rep["error"])
            self.assertTrue(rep["supports_shrinking"])
            self.assertEqual(rep["get_error"], "ErrorType.REMOTE_ERROR")
            self.assertEqual(rep["shape"], (rank - 1, 2, rank - 1, 2, "mccl"))
            self.assertEqual(rep["after_allreduce"], 10.0 + 20.0)
            self.assertEqual(rep["after_allgather"], [1.0, 2.0])

    def test_shrink_subgroup_with_abort_after_rank_2_is_killed(self):
        got = harness.run_ranks(shrink_subgroup_ranks, WORLD, init="tcp", allow_failures=True,
                                env={"MCCL_TIMEOUT_MS": "10000"})
        self.assertFalse(got[2][0])
        self.assertIn("rank 2 exited with status -9", got[2][1])
        for rank in (0, 1):
            ok, rep = got[rank]
            self.assertTrue(ok, rep)
            self.assertEqual(rep["before"], 6.0)
            self.assertIsNotNone(rep["error"])
            self.assertIn("lost rank 2", rep["error"])
            self.assertEqual(rep["shape"], (rank, 2, [0, 1]))
            self.assertEqual(rep["after_allreduce"], 5.0 + 6.0)


if __name__ == "__main__":
    unittest.main()
