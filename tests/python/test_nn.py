"""mccl.nn on 2 and 4 ranks of backend "mccl", against the same models run
unsharded on one rank: a sharded MLP (from_linear, and shard_inplace), an
attention block with a fused QKV projection (segments=3), the int8 layers
against a dequantized reference, sum_gradients, average_gradients (buckets,
mixed dtypes, bfloat16 on the wire) and one training step against torch's
DistributedDataParallel. Gradients of sharded weights are compared with the
matching rows or columns of the full layer's gradients.

Each world size runs every check in one launch (startup is the expensive
part) and reports every mismatch it found. Errors that need no group run in
the test process itself, where mccl.nn sees a group of one.
"""

import copy
import unittest

import harness  # first: it puts the built mccl on sys.path
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import mccl.nn as mnn

F64 = torch.float64


class Checker:
    """Collects mismatches instead of stopping at the first."""

    def __init__(self, rank):
        self.rank = rank
        self.problems = []

    def fail(self, what, detail):
        self.problems.append(f"rank {self.rank} {what}: {detail}")

    def true(self, what, ok, detail=""):
        if not ok:
            self.fail(what, detail or "false")

    def close(self, what, got, want, rtol=1e-9, atol=1e-9):
        if got is None or got.shape != want.shape or got.dtype != want.dtype:
            self.fail(what, f"got {None if got is None else (got.dtype, tuple(got.shape))}, "
                            f"want {(want.dtype, tuple(want.shape))}")
        elif not torch.allclose(got.double(), want.double(), rtol=rtol, atol=atol):
            diff = (got.double() - want.double()).abs().max().item()
            self.fail(what, f"differs by up to {diff:.3g}")

    def raises(self, what, error, mentions, fn):
        try:
            fn()
        except error as e:
            if not all(word in str(e) for word in mentions):
                self.fail(what, f"message {str(e)!r} does not name {mentions}")
        else:
            self.fail(what, f"no {error.__name__}")


def rows(n, world, rank, segments=1):
    """Indices of rank's share of n features: its slice of each of the
    `segments` equal blocks."""
    block, share = n // segments, n // segments // world
    return [s * block + rank * share + i for s in range(segments) for i in range(share)]


def run_loss(model, x, weights):
    """model(x), with (output * weights).sum() backpropagated."""
    y = model(x)
    (y * weights).sum().backward()
    return y.detach()


def check_mlp(c, name, shard_up, shard_down, rank, world):
    torch.manual_seed(0)  # the same full model and data on every rank
    up, down = nn.Linear(6, 8, dtype=F64), nn.Linear(8, 5, dtype=F64)
    x, weights = torch.randn(3, 6, dtype=F64), torch.randn(3, 5, dtype=F64)
    s_up, s_down = shard_up(copy.deepcopy(up)), shard_down(copy.deepcopy(down))

    x_full, x_mine = x.clone().requires_grad_(), x.clone().requires_grad_()
    want = run_loss(nn.Sequential(up, nn.ReLU(), down), x_full, weights)
    got = run_loss(nn.Sequential(s_up, nn.ReLU(), s_down), x_mine, weights)
    c.close(f"{name} output", got, want)
    c.close(f"{name} input gradient", x_mine.grad, x_full.grad)
    mine = rows(8, world, rank)
    c.close(f"{name} all-to-sharded weight", s_up.weight.detach(), up.weight.detach()[mine])
    c.close(f"{name} all-to-sharded weight gradient", s_up.weight.grad, up.weight.grad[mine])
    c.close(f"{name} all-to-sharded bias gradient", s_up.bias.grad, up.bias.grad[mine])
    c.close(f"{name} sharded-to-all weight gradient", s_down.weight.grad, down.weight.grad[:, mine])
    c.close(f"{name} sharded-to-all bias gradient", s_down.bias.grad, down.bias.grad)
    return s_up, s_down


def inplace(sharding):
    return lambda linear: mnn.shard_inplace(linear, sharding)


class Attention(nn.Module):
    """Multi-head self-attention with a fused QKV projection; `heads` is
    the number of heads this module computes (all, or one rank's)."""

    def __init__(self, qkv, out, heads):
        super().__init__()
        self.qkv, self.out, self.heads = qkv, out, heads

    def forward(self, x):
        batch, length, _ = x.shape
        q, k, v = (t.reshape(batch, length, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        mixed = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, length, -1)
        return self.out(mixed)


def check_attention(c, rank, world):
    dim, heads = 8, 4
    torch.manual_seed(1)
    qkv, out = nn.Linear(dim, 3 * dim, dtype=F64), nn.Linear(dim, dim, dtype=F64)
    x, weights = torch.randn(2, 3, dim, dtype=F64), torch.randn(2, 3, dim, dtype=F64)
    s_qkv = mnn.shard_linear(qkv, "all-to-sharded", segments=3)
    s_out = mnn.shard_linear(out, "sharded-to-all")

    x_full, x_mine = x.clone().requires_grad_(), x.clone().requires_grad_()
    want = run_loss(Attention(qkv, out, heads), x_full, weights)
    got = run_loss(Attention(s_qkv, s_out, heads // world), x_mine, weights)
    c.close("attention output", got, want)
    c.close("attention input gradient", x_mine.grad, x_full.grad)
    mine_qkv, mine = rows(3 * dim, world, rank, segments=3), rows(dim, world, rank)
    c.close("attention qkv weight gradient", s_qkv.weight.grad, qkv.weight.grad[mine_qkv])
    c.close("attention qkv bias gradient", s_qkv.bias.grad, qkv.bias.grad[mine_qkv])
    c.close("attention out weight gradient", s_out.weight.grad, out.weight.grad[:, mine])
    c.close("attention out bias gradient", s_out.bias.grad, out.bias.grad)


def dequantized(weight):
    """Symmetric int8 quantization per output row, undone."""
    scale = weight.abs().amax(dim=1, keepdim=True) / 127
    return torch.round(weight / scale).clamp(-127, 127) * scale


def check_quantized(c, rank, world):
    torch.manual_seed(2)
    up, down = nn.Linear(6, 8, dtype=F64), nn.Linear(8, 5, dtype=F64)
    x, weights = torch.randn(3, 6, dtype=F64), torch.randn(3, 5, dtype=F64)
    q_up = mnn.QuantizedAllToShardedLinear.from_linear(up)
    q_down = mnn.shard_linear(mnn.QuantizedLinear.from_linear(down), "sharded-to-all")

    def reference(x):
        hidden = F.linear(x, dequantized(up.weight.detach()), up.bias.detach())
        return F.linear(hidden.relu(), dequantized(down.weight.detach()), down.bias.detach())

    x_ref, x_mine = x.clone().requires_grad_(), x.clone().requires_grad_()
    want = run_loss(reference, x_ref, weights)
    got = run_loss(nn.Sequential(q_up, nn.ReLU(), q_down), x_mine, weights)
    c.close("quantized output", got, want)
    c.close("quantized input gradient", x_mine.grad, x_ref.grad)
    c.true("quantized weights are int8", q_up.weight.dtype == q_down.weight.dtype == torch.int8,
           f"{q_up.weight.dtype}, {q_down.weight.dtype}")
    c.true("quantized shard shapes", tuple(q_up.weight.shape) == (8 // world, 6)
           and tuple(q_down.weight.shape) == (5, 8 // world) and tuple(q_down.scales.shape) == (5,),
           f"{tuple(q_up.weight.shape)}, {tuple(q_down.weight.shape)}, {tuple(q_down.scales.shape)}")
    c.true("quantized layers are frozen", not list(q_up.parameters()) + list(q_down.parameters()))
    # From the float layer, a column split quantizes whole rows, then splits.
    from_float = mnn.QuantizedShardedToAllLinear.from_linear(down)
    c.true("quantized sharded-to-all from a float layer", torch.equal(from_float.weight, q_down.weight)
           and torch.equal(from_float.scales, q_down.scales), "differs from the split QuantizedLinear")
    # The quantization itself: within half a step of the float weight.
    whole = mnn.QuantizedLinear.from_linear(up)
    error = (whole.dequantized_weight() - up.weight.detach()).abs()
    c.true("quantization error within half a step", bool((error <= whole.scales[:, None] / 2 + 1e-12).all()),
           f"{(error / whole.scales[:, None]).max().item():.3g} steps")


def check_sum_gradients(c, rank, world):
    x = torch.full((4,), float(rank + 1), dtype=F64, requires_grad=True)
    y = mnn.sum_gradients()(x)
    c.close("sum_gradients forward", y.detach(), x.detach())
    (y * torch.arange(1.0, 5.0, dtype=F64) * (rank + 1)).sum().backward()
    ranks_sum = world * (world + 1) / 2
    c.close("sum_gradients backward", x.grad, torch.arange(1.0, 5.0, dtype=F64) * ranks_sum)


def gradient_tree(rank):
    """Rank's gradients, dtypes interleaved: per dtype, at a 64-byte limit,
    float32 60+12+16 B, float64 40+16+24 B, float16 20+18 B."""
    g = torch.Generator().manual_seed(100 + rank)

    def randn(*shape, dtype):
        return torch.randn(*shape, generator=g, dtype=F64).to(dtype)

    return {
        "a": randn(5, 3, dtype=torch.float32),
        "layers": [{"w": randn(5, dtype=F64), "b": randn(3, dtype=torch.float32)},
                   None,
                   (randn(10, dtype=torch.float16), randn(2, dtype=F64))],
        "c": randn(2, 2, dtype=torch.float32),
        "h": randn(3, 3, dtype=torch.float16),
        "f": randn(3, dtype=F64),
    }


def flat_leaves(tree):
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in flat_leaves(value)]
    if isinstance(tree, (list, tuple)):
        return [leaf for value in tree for leaf in flat_leaves(value)]
    return [tree]


def check_average_gradients(c, rank, world):
    mine = gradient_tree(rank)
    before = [None if t is None else t.clone() for t in flat_leaves(mine)]
    every = [flat_leaves(gradient_tree(r)) for r in range(world)]
    means = [None if t is None else (sum(tree[i].double() for tree in every) / world)
             for i, t in enumerate(every[0])]

    sent = []
    real = mnn._all_reduce_sum

    def counting(tensor, group):
        sent.append((tensor.dtype, tensor.numel() * tensor.element_size()))
        return real(tensor, group)

    mnn._all_reduce_sum = counting
    try:
        exact = mnn.average_gradients(mine, all_reduce_size=64)
        exact_sent, sent[:] = list(sent), []
        wire = mnn.average_gradients(mine, all_reduce_size=64, communication_type=torch.bfloat16)
        wire_sent = list(sent)
    finally:
        mnn._all_reduce_sum = real

    c.true("average_gradients keeps the structure",
           isinstance(exact["layers"], list) and isinstance(exact["layers"][2], tuple)
           and exact["layers"][1] is None and list(exact) == list(mine), repr(exact)[:200])
    # Per dtype, 64-byte buckets: float32 [a] [b c], float64 [w e] [f], float16 [g h].
    c.true("average_gradients buckets", sorted(exact_sent, key=str) == sorted(
        [(torch.float32, 60), (torch.float32, 28), (F64, 56), (F64, 24), (torch.float16, 38)], key=str),
        f"all-reduces of {exact_sent}")
    # bfloat16 halves float32 and quarters float64: one bucket per dtype.
    c.true("average_gradients bfloat16 buckets", sorted(n for _, n in wire_sent) == [20, 38, 44]
           and all(d == torch.bfloat16 for d, _ in wire_sent), f"all-reduces of {wire_sent}")
    tol = {torch.float32: 1e-6, F64: 1e-12, torch.float16: 2e-3}
    bf16_moved = False
    for i, (got, bf16, want, old, new) in enumerate(zip(flat_leaves(exact), flat_leaves(wire), means,
                                                        before, flat_leaves(mine))):
        if want is None:
            c.true(f"average_gradients leaf {i} stays None", got is None and bf16 is None)
            continue
        c.close(f"average_gradients leaf {i}", got, want.to(old.dtype), rtol=tol[old.dtype], atol=tol[old.dtype])
        c.close(f"average_gradients bfloat16 leaf {i}", bf16, want.to(old.dtype), rtol=2e-2, atol=2e-2)
        c.true(f"average_gradients leaf {i}: input unchanged", torch.equal(new, old))
        bf16_moved |= not torch.equal(bf16, got)
    c.true("bfloat16 on the wire rounds", bf16_moved)


def check_ddp_step(c, rank, world):
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    g = torch.Generator().manual_seed(10 + rank)  # each rank its own batch
    x, target = torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)

    def step(net, after_backward):
        opt = torch.optim.SGD(net.parameters(), lr=0.5)
        F.mse_loss(net(x), target).backward()
        after_backward(net)
        opt.step()
        return [p.detach() for p in net.parameters()]

    def average(net):
        params = dict(net.named_parameters())
        local = {n: p.grad for n, p in params.items()}
        averaged = mnn.average_gradients(local, all_reduce_size=64)
        c.true("ranks' gradients differ before averaging", not torch.equal(averaged["0.weight"], local["0.weight"]))
        for n, p in params.items():
            p.grad = averaged[n]

    mine = step(copy.deepcopy(model), average)
    ddp = nn.parallel.DistributedDataParallel(copy.deepcopy(model))
    want = step(ddp, lambda net: None)
    for i, (got, w, start) in enumerate(zip(mine, want, model.parameters())):
        c.close(f"DDP step parameter {i}", got, w, rtol=1e-5, atol=1e-6)
        c.true(f"DDP step parameter {i} moved", not torch.equal(w, start.detach()))


def check_errors(c, rank, world):
    c.raises("out_features not a multiple of the ranks", ValueError, ["out_features"],
             lambda: mnn.AllToShardedLinear(4, world + 1))
    c.raises("in_features not a multiple of the ranks", ValueError, ["in_features"],
             lambda: mnn.ShardedToAllLinear(world + 1, 4))
    c.raises("out_features not a multiple of ranks x segments", ValueError, ["out_features", "segments"],
             lambda: mnn.shard_linear(nn.Linear(4, 3 * world + 3), "all-to-sharded", segments=3))
    c.raises("quantized in_features not a multiple of the ranks", ValueError, ["in_features"],
             lambda: mnn.QuantizedShardedToAllLinear.from_linear(nn.Linear(world + 1, 4)))


def nn_checks(rank, world):
    c = Checker(rank)
    check_mlp(c, "from_linear", mnn.AllToShardedLinear.from_linear, mnn.ShardedToAllLinear.from_linear,
              rank, world)
    s_up, s_down = check_mlp(c, "shard_inplace", inplace("all-to-sharded"), inplace("sharded-to-all"),
                             rank, world)
    c.true("shard_inplace keeps the class", type(s_up) is nn.Linear and type(s_down) is nn.Linear)
    check_attention(c, rank, world)
    check_quantized(c, rank, world)
    check_sum_gradients(c, rank, world)
    check_average_gradients(c, rank, world)
    check_ddp_step(c, rank, world)
    check_errors(c, rank, world)
    dist.barrier()
    return c.problems


class NnTest(unittest.TestCase):
    def run_world(self, world):
        problems = [p for per_rank in harness.run_ranks(nn_checks, world, deadline=90) for p in per_rank]
        self.assertEqual(problems, [], "\n".join(problems[:40]))

    def test_two_ranks(self):
        self.run_world(2)

    def test_four_ranks(self):
        self.run_world(4)

    def test_one_process(self):
        """No process group: a group of one rank, and the errors that need
        no group."""
        self.assertFalse(dist.is_initialized())
        grads = {"w": torch.ones(3), "b": [None]}
        self.assertIs(mnn.average_gradients(grads), grads)
        x = torch.randn(2, 4)
        linear = nn.Linear(4, 6)
        self.assertTrue(torch.allclose(mnn.shard_linear(linear, "sharded-to-all")(x), linear(x)))
        for fn in (lambda: mnn.shard_linear(linear, "rows"),
                   lambda: mnn.shard_inplace(linear, "all-to-all")):
            with self.assertRaisesRegex(ValueError, "sharding="):
                fn()
        for fn in (lambda: mnn.shard_linear(nn.ReLU(), "all-to-sharded"),
                   lambda: mnn.shard_inplace(nn.Conv1d(2, 2, 1), "sharded-to-all"),
                   lambda: mnn.AllToShardedLinear.from_linear(nn.Identity())):
            with self.assertRaisesRegex(ValueError, "Linear"):
                fn()
        with self.assertRaisesRegex(ValueError, "out_features=10 .*segments=3"):
            mnn.shard_linear(nn.Linear(4, 10), "all-to-sharded", segments=3)
        with self.assertRaisesRegex(ValueError, "communication_type"):
            mnn.average_gradients(grads, communication_type="fp16")


if __name__ == "__main__":
    unittest.main()
