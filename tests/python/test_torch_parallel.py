"""torch 2.x's parallelism APIs over backend "mccl" on 2 ranks, each result
checked against one process computing the same thing with plain tensors:

- FSDP2 (`fully_shard` on a CPU DeviceMesh): parameters really sharded,
  and after 3 SGD steps (each rank training on its half of the batch) equal
  to one process training on the whole batch; the same with bf16
  reduce-scatter (MixedPrecisionPolicy(reduce_dtype=bfloat16)).
- DTensor: distribute_tensor, redistribute between Shard(0), Shard(1),
  Replicate and Partial (allgather, allreduce, reduce-scatter underneath;
  on a CPU mesh torch turns Shard(0) -> Shard(1) into allgather + chunk
  instead of alltoall, whatever the backend), full_tensor.
- Tensor parallelism: parallelize_module with ColwiseParallel and
  RowwiseParallel on an MLP: outputs, gradients and the parameters after 2
  SGD steps equal the unsharded MLP's.
- Functional collectives (torch.distributed._functional_collectives):
  all_reduce, all_gather_single, reduce_scatter_single, all_to_all_single
  (equal and unequal splits), all_reduce_coalesced, eager and inside a
  function compiled with torch.compile(backend="aot_eager",
  fullgraph=True).
"""

import unittest

import harness

WORLD = 2
STEPS = 3
BATCH = 8


def mlp(width_in=8, hidden=16, width_out=8):
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(width_in, hidden), nn.Tanh(), nn.Linear(hidden, width_out))


def batch(step, width_in=8, width_out=8):
    import torch
    g = torch.Generator().manual_seed(500 + step)
    return torch.randn(BATCH, width_in, generator=g), torch.randn(BATCH, width_out, generator=g)


def single_process_training(steps):
    """Parameters (flattened, in order) after `steps` SGD steps on whole batches."""
    import torch
    import torch.nn.functional as F
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        x, y = batch(step)
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().reshape(-1).tolist() for p in model.parameters()]


# -- FSDP2 -------------------------------------------------------------------

def fsdp_ranks(rank, world):
    import torch
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import Shard

    torch.set_num_threads(1)
    mesh = init_device_mesh("cpu", (world,))
    report = {}
    for label, policy in (("fp32", MixedPrecisionPolicy()),
                          ("bf16_reduce", MixedPrecisionPolicy(reduce_dtype=torch.bfloat16))):
        model = mlp()
        for layer in (model[0], model[2]):
            fully_shard(layer, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        w = model[0].weight
        report[label + "_sharding"] = (type(w).__name__, w.placements == (Shard(0),),
                                       list(w.to_local().shape), list(w.shape))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        per_rank = BATCH // world
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        for step in range(STEPS):
            x, y = batch(step)
            opt.zero_grad()
            F.mse_loss(model(x[mine]), y[mine]).backward()
            opt.step()
        report[label] = [p.full_tensor().reshape(-1).tolist() for p in model.parameters()]
    return report


# -- DTensor and tensor parallelism -----------------------------------------

def dtensor_ranks(rank, world):
    import torch
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    torch.set_num_threads(1)
    mesh = init_device_mesh("cpu", (world,))
    report = {}

    # Every rank holds the same global tensor; distribute_tensor keeps its shard.
    full = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    rows = distribute_tensor(full, mesh, [Shard(0)])
    report["shard0_local"] = rows.to_local().tolist()
    report["shard0_to_replicate"] = rows.redistribute(mesh, [Replicate()]).to_local().tolist()
    report["shard0_to_shard1"] = rows.redistribute(mesh, [Shard(1)]).to_local().tolist()
    # A Partial tensor: each rank's local value is one summand.
    mine = torch.full((4, 2), float(rank + 1))
    partial = torch.distributed.tensor.DTensor.from_local(mine, mesh, [Partial()])
    report["partial_to_replicate"] = partial.redistribute(mesh, [Replicate()]).to_local().tolist()
    report["partial_to_shard0"] = partial.redistribute(mesh, [Shard(0)]).to_local().tolist()
    report["full_tensor"] = (rows * 2).full_tensor().tolist()

    # Tensor parallelism: first Linear column-wise, second row-wise.
    model = mlp()
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    report["tp_local_shapes"] = [list(model[0].weight.to_local().shape),
                                 list(model[2].weight.to_local().shape)]
    x, y = batch(0)
    out = model(x)
    report["tp_output"] = out.tolist()
    F.mse_loss(out, y).backward()
    report["tp_grads"] = [p.grad.full_tensor().reshape(-1).tolist() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.step()
    for step in range(1, 2):
        x, y = batch(step)
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    report["tp_params"] = [p.full_tensor().reshape(-1).tolist() for p in model.parameters()]
    return report


# -- functional collectives ------------------------------------------------

def funcol_ranks(rank, world):
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc

    torch.set_num_threads(1)
    group = dist.group.WORLD

    def collectives(t):
        a = fc.all_reduce(t * 2, "sum", group)
        b = fc.all_gather_single(t + 1, 0, group)
        c = fc.reduce_scatter_single(b * (rank + 1), "sum", 0, group)
        d = fc.all_to_all_single(t, None, None, group)
        # rank r sends r + 1 elements to every rank.
        sends = [rank + 1] * world
        receives = [r + 1 for r in range(world)]
        e = fc.all_to_all_single(torch.arange(world * (rank + 1), dtype=torch.float32) + 100 * rank,
                                 receives, sends, group)
        f, g = fc.all_reduce_coalesced([t, t * t], "max", group)
        return a, b, c, d, e, f, g

    t = torch.arange(4, dtype=torch.float32) + 10 * rank
    report = {"eager": [x.tolist() for x in collectives(t)]}
    # aot_eager traces the collectives into the graph (as _c10d_functional
    # ops) without inductor's C++ compile.
    compiled = torch.compile(collectives, backend="aot_eager", fullgraph=True)
    report["compiled"] = [x.tolist() for x in compiled(t)]
    return report


def funcol_expected(rank, world):
    import torch
    inputs = [torch.arange(4, dtype=torch.float32) + 10 * r for r in range(world)]
    a = sum(2 * t for t in inputs)
    b = torch.cat([t + 1 for t in inputs])
    c = sum(b * (r + 1) for r in range(world)).chunk(world)[rank]
    d = torch.cat([t.chunk(world)[rank] for t in inputs])
    e = torch.cat([(torch.arange(world * (r + 1), dtype=torch.float32) + 100 * r)
                   .split(r + 1)[rank] for r in range(world)])
    f = torch.stack(inputs).max(0).values
    g = torch.stack([t * t for t in inputs]).max(0).values
    return [x.tolist() for x in (a, b, c, d, e, f, g)]


class TorchParallelTest(unittest.TestCase):
    def assert_close(self, got, want, tol, what):
        import torch
        for i, (g, w) in enumerate(zip(got, want)):
            g, w = torch.tensor(g), torch.tensor(w)
            self.assertEqual(g.shape, w.shape, f"{what}[{i}]: shape")
            self.assertTrue(torch.allclose(g, w, rtol=tol, atol=tol),
                            f"{what}[{i}]: off by {(g - w).abs().max().item()}")
        self.assertEqual(len(got), len(want), what)

    def test_fsdp2_matches_one_process(self):
        reports = harness.run_ranks(fsdp_ranks, WORLD, deadline=150)
        want = single_process_training(STEPS)
        initial = single_process_training(0)
        for rank, rep in enumerate(reports):
            for label in ("fp32", "bf16_reduce"):
                cls, shard0, local, glob = rep[label + "_sharding"]
                self.assertEqual((cls, shard0, local, glob), ("DTensor", True, [16 // WORLD, 8], [16, 8]),
                                 f"rank {rank} {label}: not sharded as FSDP2 shards")
            # fp32 sums of two halves of a mean: float32 rounding only.
            self.assert_close(rep["fp32"], want, 1e-5, f"rank {rank} fp32")
            # bf16 gradients (8 significant bits) over 3 steps at lr 0.1.
            self.assert_close(rep["bf16_reduce"], want, 2e-3, f"rank {rank} bf16 reduce")
        moved = max(abs(a - b) for p, q in zip(want, initial) for a, b in zip(p, q))
        self.assertGreater(moved, 1e-2)

    def test_dtensor_and_tensor_parallel_match_one_process(self):
        import torch
        import torch.nn.functional as F
        reports = harness.run_ranks(dtensor_ranks, WORLD, deadline=150)
        full = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        model = mlp()
        x, y = batch(0)
        out = model(x)
        F.mse_loss(out, y).backward()
        grads = [p.grad.reshape(-1).tolist() for p in model.parameters()]
        params = single_process_training(2)
        ones_twos = sum(float(r + 1) for r in range(WORLD))
        for rank, rep in enumerate(reports):
            self.assertEqual(rep["shard0_local"], full.chunk(WORLD, 0)[rank].tolist())
            self.assertEqual(rep["shard0_to_replicate"], full.tolist())
            self.assertEqual(rep["shard0_to_shard1"], full.chunk(WORLD, 1)[rank].tolist())
            self.assertEqual(rep["partial_to_replicate"], [[ones_twos] * 2] * 4)
            self.assertEqual(rep["partial_to_shard0"], [[ones_twos] * 2] * (4 // WORLD))
            self.assertEqual(rep["full_tensor"], (full * 2).tolist())
            self.assertEqual(rep["tp_local_shapes"], [[16 // WORLD, 8], [8, 16 // WORLD]])
            self.assert_close(rep["tp_output"], out.tolist(), 1e-5, f"rank {rank} TP output")
            self.assert_close(rep["tp_grads"], grads, 1e-5, f"rank {rank} TP gradients")
            self.assert_close(rep["tp_params"], params, 1e-5, f"rank {rank} TP parameters")

    def test_functional_collectives_eager_and_compiled(self):
        reports = harness.run_ranks(funcol_ranks, WORLD, deadline=150)
        for rank, rep in enumerate(reports):
            want = funcol_expected(rank, WORLD)
            self.assertEqual(rep["eager"], want, f"rank {rank} eager")
            self.assertEqual(rep["compiled"], want, f"rank {rank} compiled")


if __name__ == "__main__":
    unittest.main()
