"""The c10d::Backend calls of torch 2.x that the plain ops (test_ops.py) do
not reach, through backend "mccl" on 2 and 3 ranks, each result checked
against one computed here from every rank's input:

- registration for CPU tensors (devices=["cpu"], "cpu:mccl" strings);
- coalescing: _coalescing_manager over all_reduce, all_gather_into_tensor
  and reduce_scatter_tensor (allreduce_coalesced,
  allgather_into_tensor_coalesced, reduce_scatter_tensor_coalesced), and
  batch_isend_irecv (startCoalescing / endCoalescing);
- monitored_barrier, passing and naming a rank that never arrives, and
  rank 0 running out of time before anyone arrived;
- the backend's getError after a failed op, and abort;
- all_reduce of sparse (COO) tensors, as torch hands gloo one: SUM of
  every rank's entries, a rank with none, dense dimensions, refusals;
- sequence numbers, and collectives under TORCH_DISTRIBUTED_DEBUG=DETAIL
  (torch wraps the backend and compares them across ranks).
"""

import datetime
import unittest

import harness


def _coalesced_ops(rank, world):
    import torch
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _coalescing_manager

    report = {}
    # all_reduce x3 inside the manager: one allreduce_coalesced.
    ts = [torch.full((n,), float(rank + 1 + i)) for i, n in enumerate((3, 1, 5))]
    with _coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    report["allreduce"] = [t.tolist() for t in ts]

    # all_gather_into_tensor x2: one allgather_into_tensor_coalesced.
    ins = [torch.arange(2, dtype=torch.float32) + 10 * rank,
           torch.arange(3, dtype=torch.float32) + 100 * rank]
    outs = [torch.empty(world * t.numel()) for t in ins]
    with _coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    report["allgather"] = [o.tolist() for o in outs]

    # reduce_scatter_tensor x2: one reduce_scatter_tensor_coalesced.
    ins = [torch.arange(world * 2, dtype=torch.float32) * (rank + 1),
           torch.arange(world * 3, dtype=torch.float32) + rank]
    outs = [torch.empty(2), torch.empty(3)]
    with _coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.reduce_scatter_tensor(o, i)
    cm.wait()
    report["reduce_scatter"] = [o.tolist() for o in outs]

    # A ring exchange in one batch: startCoalescing / endCoalescing.
    right, left = (rank + 1) % world, (rank - 1) % world
    send = torch.full((4,), float(rank))
    recv = torch.empty(4)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, right),
                                    dist.P2POp(dist.irecv, recv, left)])
    for w in works:
        w.wait()
    report["ring"] = recv.tolist()
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    report["supports_coalescing"] = backend.supports_coalescing
    report["backend_of_cpu"] = dist.get_backend()
    return report


# torch.distributed.monitored_barrier itself accepts gloo only (torch
# 2.13 checks the name); the backend's own monitored_barrier is what other
# callers (and torch's gloo-free wrappers) reach.
def _monitored_barrier_all_arrive(rank, world):
    import mccl
    backend = mccl.backend_of()
    backend.monitored_barrier(timeout=datetime.timedelta(seconds=20))
    backend.monitored_barrier(timeout=datetime.timedelta(seconds=20), wait_all_ranks=True)
    return True


def _monitored_barrier_rank_missing(rank, world):
    import time
    import mccl
    missing = world - 1
    if rank == missing:
        # Never arrives: stays alive past rank 0's timeout, then leaves
        # without destroying the group (the harness would wait on it).
        time.sleep(4.0)
        return "stayed away"
    start = time.monotonic()
    try:
        mccl.backend_of().monitored_barrier(timeout=datetime.timedelta(seconds=1.5),
                                            wait_all_ranks=True)
    except Exception as e:  # noqa: BLE001 -- the message is what is checked
        return {"error": str(e), "seconds": time.monotonic() - start}
    return {"error": None}


def _monitored_barrier_rank_0_out_of_time(rank, world):
    import torch.distributed as dist
    group = dist.new_group(ranks=list(range(world)))
    if rank != 0:
        # Never arrives, but stays alive past rank 0's verdict: a rank that
        # had left would be named as gone, not as late.
        import time
        time.sleep(2.0)
        return None
    try:
        group.monitored_barrier(datetime.timedelta(seconds=0))
    except RuntimeError as e:
        return str(e)
    return "passed"


def _sparse_all_reduce(rank, world):
    import torch
    import torch.distributed as dist
    report = {}
    # Rank r holds entries at (r, r) and (0, 1); the last rank holds none.
    if rank == world - 1:
        t = torch.sparse_coo_tensor(torch.empty(2, 0, dtype=torch.int64), torch.empty(0), (4, 4))
    else:
        t = torch.sparse_coo_tensor([[rank, 0], [rank, 1]], [float(rank + 1), 10.0], (4, 4))
    dist.all_reduce(t)
    report["matrix"] = t.to_dense().tolist()
    # Dense dimensions: values are rows of 3, and async with a future.
    rows = torch.sparse_coo_tensor([[rank % 2]], [[float(rank)] * 3], (2, 3))
    work = dist.all_reduce(rows, async_op=True)
    work.wait()
    report["rows"] = rows.to_dense().tolist()
    for name, bad, op in (("op", t, dist.ReduceOp.MAX),
                          ("sizes", torch.sparse_coo_tensor([[0]], [1.0], (4 + rank,)), dist.ReduceOp.SUM)):
        try:
            dist.all_reduce(bad, op=op)
            report[name] = None
        except Exception as e:  # noqa: BLE001 -- the message is what is checked
            report[name] = str(e)
    return report


def _sequence_numbers_in_debug_mode(rank, world):
    import torch
    import torch.distributed as dist
    import mccl
    backend = mccl.backend_of()
    before = backend._get_sequence_number_for_group()
    t = torch.ones(3)
    dist.all_reduce(t)
    dist.broadcast(t, 0)
    after = backend._get_sequence_number_for_group()
    # A group made under DETAIL is wrapped by torch's debug wrapper, which
    # asks each collective's sequence number and compares the ranks'.
    sub = dist.new_group(ranks=list(range(world)))
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank}, group=sub)
    return {"before": before, "after": after, "gathered": gathered, "total": t.tolist()}


def _get_error_after_failure(rank, world):
    import torch
    import torch.distributed as dist
    import mccl
    backend = mccl.backend_of()
    before = str(backend.get_error())
    failed = None
    if rank == 0:
        # Rank 1 never sends: the receive fails at the op deadline.
        try:
            dist.recv(torch.empty(1), src=1, tag=7)
        except Exception as e:  # noqa: BLE001
            failed = str(e)
    else:
        import time
        time.sleep(3.0)  # alive, silent, past rank 0's deadline
    return {"before": before, "after": str(backend.get_error()), "failed": failed}


class BackendApiTest(unittest.TestCase):
    def test_coalesced_ops_and_batched_p2p(self):
        for world in (2, 3):
            with self.subTest(world=world):
                reports = harness.run_ranks(_coalesced_ops, world)
                for rank, rep in enumerate(reports):
                    total = sum(range(1, world + 1))
                    self.assertEqual(rep["allreduce"],
                                     [[float(total + i * world)] * n for i, n in enumerate((3, 1, 5))])
                    self.assertEqual(rep["allgather"][0],
                                     [float(v + 10 * r) for r in range(world) for v in range(2)])
                    self.assertEqual(rep["allgather"][1],
                                     [float(v + 100 * r) for r in range(world) for v in range(3)])
                    # Block `rank` of each input, summed over the ranks.
                    want0 = [sum(float(j * (r + 1)) for r in range(world))
                             for j in range(rank * 2, rank * 2 + 2)]
                    want1 = [sum(float(j + r) for r in range(world))
                             for j in range(rank * 3, rank * 3 + 3)]
                    self.assertEqual(rep["reduce_scatter"], [want0, want1])
                    self.assertEqual(rep["ring"], [float((rank - 1) % world)] * 4)
                    self.assertTrue(rep["supports_coalescing"])
                    self.assertEqual(rep["backend_of_cpu"], "mccl")

    def test_monitored_barrier_passes_when_all_arrive(self):
        self.assertEqual(harness.run_ranks(_monitored_barrier_all_arrive, 3), [True] * 3)

    def test_monitored_barrier_names_the_rank_that_never_arrives(self):
        reports = harness.run_ranks(_monitored_barrier_rank_missing, 3, pg_timeout=30.0)
        rank0 = reports[0]
        self.assertIsNotNone(rank0["error"], "rank 0 passed a barrier rank 2 never reached")
        self.assertIn("Rank 2 failed to pass monitoredBarrier in 1500 ms", rank0["error"])
        self.assertLess(rank0["seconds"], 10.0)
        # Rank 1 is not answered: it fails too, naming rank 0, either at its
        # own timeout ("rank 0 did not answer") or, when rank 0 has left
        # first, with rank 0's end of the group.
        self.assertIsNotNone(reports[1]["error"])
        self.assertIn("rank 0", reports[1]["error"])

    def test_monitored_barrier_rank_0_out_of_time(self):
        reports = harness.run_ranks(_monitored_barrier_rank_0_out_of_time, 3)
        self.assertIn("Rank 0 timed out in monitoredBarrier after 0 ms, before rank 1 arrived", reports[0])

    def test_sparse_all_reduce_sums_every_ranks_entries(self):
        for world in (2, 3):
            with self.subTest(world=world):
                reports = harness.run_ranks(_sparse_all_reduce, world)
                want = [[0.0] * 4 for _ in range(4)]
                for r in range(world - 1):
                    want[r][r] += float(r + 1)
                    want[0][1] += 10.0
                want_rows = [[0.0] * 3, [0.0] * 3]
                for r in range(world):
                    want_rows[r % 2] = [v + float(r) for v in want_rows[r % 2]]
                for rep in reports:
                    self.assertEqual(rep["matrix"], want)
                    self.assertEqual(rep["rows"], want_rows)
                    self.assertIn("sparse tensor is reduced with SUM only", rep["op"])
                # Each rank names a rank whose sizes differ from its own.
                for rank, rep in enumerate(reports):
                    other = 1 if rank == 0 else 0
                    self.assertIn(f"rank {other}'s sparse tensor has sparse_dim 1, dense_dim 0, "
                                  f"sizes [{4 + other}]", rep["sizes"])

    def test_sequence_numbers_and_the_debug_wrapper(self):
        reports = harness.run_ranks(_sequence_numbers_in_debug_mode, 3,
                                    env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
        for rep in reports:
            self.assertEqual(rep["after"] - rep["before"], 2)
            self.assertEqual(rep["gathered"], [{"rank": r} for r in range(3)])
            self.assertEqual(rep["total"], [3.0] * 3)
        self.assertEqual(len({rep["after"] for rep in reports}), 1)

    def test_get_error_reports_the_timeout_of_a_failed_op(self):
        reports = harness.run_ranks(_get_error_after_failure, 2,
                                    env={"MCCL_TIMEOUT_MS": "1500"})
        self.assertIn("SUCCESS", reports[0]["before"])
        self.assertIsNotNone(reports[0]["failed"])
        self.assertIn("TIMEOUT", reports[0]["after"])
        self.assertIn("SUCCESS", reports[1]["after"])


if __name__ == "__main__":
    unittest.main()
