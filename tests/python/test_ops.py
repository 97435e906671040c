"""Every torch.distributed op through backend "mccl" (torch 2.x), on 2 and
3 ranks, against results computed independently in the test from every
rank's input: all dtypes mccl has, every ReduceOp, contiguous and
non-contiguous tensors, async ops with wait() and get_future(), and
subgroups from new_group.

Each world runs the whole matrix in one set of processes (startup is the
expensive part) and reports every mismatch it found, not only the first.
"""

import unittest

import harness

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "uint16", "int32",
          "uint32", "int64", "uint64", "bool"]
REDOPS = ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG"]
COUNT = 7


def _input(torch, dtype, rank, n, op="SUM"):
    """Rank-dependent small values whose reductions are exact in every dtype."""
    i = torch.arange(n)
    if dtype == torch.bool:
        return ((i + rank) % 3 == 0)
    if op == "PRODUCT":
        v = (i + rank) % 2 + 1  # 1 or 2: products stay tiny
    else:
        v = (i * 3 + rank * 5) % 7 + 1
    return v.to(dtype)


def _expected(torch, dtype, op, inputs):
    """The reduction of the ranks' inputs, computed here without mccl."""
    world = len(inputs)
    if dtype == torch.bool:
        s = torch.stack([x.to(torch.int64) for x in inputs])
        if op in ("SUM", "MAX", "BOR"):
            r = s.amax(0)
        elif op in ("PRODUCT", "MIN", "BAND"):
            r = s.amin(0)
        else:  # BXOR
            r = s.sum(0) % 2
        return r.to(torch.bool)
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    s = torch.stack([x.to(wide) for x in inputs])
    if op == "SUM":
        r = s.sum(0)
    elif op == "PRODUCT":
        r = s.prod(0)
    elif op == "MIN":
        r = s.amin(0)
    elif op == "MAX":
        r = s.amax(0)
    elif op == "AVG":
        r = s.sum(0) / world if dtype.is_floating_point else torch.div(s.sum(0), world, rounding_mode="trunc")
    else:
        r = s[0].clone()
        f = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op]
        for x in s[1:]:
            r = f(r, x)
    return r.to(dtype)


def _valid(torch, dtype, op):
    if op in ("BAND", "BOR", "BXOR"):
        return not dtype.is_floating_point
    if op == "AVG":
        return dtype != torch.bool
    return True


def ops_matrix(rank, world):
    import warnings
    import torch
    # torch warns that the underscore and coalesced ops may go away; they are
    # still the Backend API, which is what this test covers.
    warnings.filterwarnings("ignore", category=UserWarning)
    import torch.distributed as dist
    R = dist.ReduceOp
    problems = []

    def check(what, got, want):
        if got.dtype != want.dtype or got.shape != want.shape:
            problems.append(f"rank {rank} {what}: got {got.dtype} {tuple(got.shape)}, "
                            f"want {want.dtype} {tuple(want.shape)}")
            return
        if want.dtype.is_floating_point:
            ok = torch.allclose(got.double(), want.double(), rtol=1e-2, atol=1e-2)
        else:
            ok = torch.equal(got, want)
        if not ok:
            problems.append(f"rank {rank} {what}: got {got.tolist()}, want {want.tolist()}")

    n = COUNT
    for name in DTYPES:
        dt = getattr(torch, name)
        inputs = [_input(torch, dt, r, n) for r in range(world)]
        mine = inputs[rank]

        # allreduce, every valid reduction; the first in a non-contiguous view
        for op in REDOPS:
            if not _valid(torch, dt, op):
                continue
            ins = [_input(torch, dt, r, n, op) for r in range(world)]
            t = ins[rank].clone()
            dist.all_reduce(t, op=getattr(R, op))
            check(f"all_reduce {name} {op}", t, _expected(torch, dt, op, ins))
            # reduce to the last rank
            t = ins[rank].clone()
            dist.reduce(t, dst=world - 1, op=getattr(R, op))
            if rank == world - 1:
                check(f"reduce {name} {op}", t, _expected(torch, dt, op, ins))
        big = torch.zeros(n, 2, dtype=dt)
        big[:, 0] = mine
        view = big[:, 0]  # stride 2: not contiguous
        assert not view.is_contiguous()
        dist.all_reduce(view)
        check(f"all_reduce non-contiguous {name}", big[:, 0], _expected(torch, dt, "SUM", inputs))
        check(f"all_reduce non-contiguous {name} leaves the rest", big[:, 1], torch.zeros(n, dtype=dt))

        # broadcast from every root, into a non-contiguous view too
        for root in range(world):
            t = mine.clone()
            dist.broadcast(t, src=root)
            check(f"broadcast {name} root {root}", t, inputs[root])
        big = torch.zeros(2, n, dtype=dt).t()
        big[:, 1] = mine
        dist.broadcast(big[:, 1], src=0)
        check(f"broadcast non-contiguous {name}", big[:, 1], inputs[0])

        # all_gather (list), _all_gather_base, all_gather_coalesced
        outs = [torch.zeros(n, dtype=dt) for _ in range(world)]
        dist.all_gather(outs, mine)
        for r in range(world):
            check(f"all_gather {name} block {r}", outs[r], inputs[r])
        flat = torch.zeros(world * n, dtype=dt)
        dist._all_gather_base(flat, mine)
        check(f"_all_gather_base {name}", flat, torch.cat(inputs))
        second = [torch.full((3,), r + 1).to(dt) for r in range(world)]
        third = [torch.full((2, 2), r).to(dt) for r in range(world)]
        # torch's layout: lists[r][i] is rank r's input i (three inputs, so
        # the layout differs from [i][r] at every world size tested).
        lists = [[torch.zeros(n, dtype=dt), torch.zeros(3, dtype=dt), torch.zeros(2, 2, dtype=dt)]
                 for _ in range(world)]
        dist.all_gather_coalesced(lists, [mine, second[rank], third[rank]])
        for r in range(world):
            check(f"all_gather_coalesced {name} rank {r} tensor 0", lists[r][0], inputs[r])
            check(f"all_gather_coalesced {name} rank {r} tensor 1", lists[r][1], second[r])
            check(f"all_gather_coalesced {name} rank {r} tensor 2", lists[r][2], third[r])

        # all_reduce_coalesced
        a, b = mine.clone(), second[rank].clone()
        dist.all_reduce_coalesced([a, b])
        check(f"all_reduce_coalesced {name} tensor 0", a, _expected(torch, dt, "SUM", inputs))
        check(f"all_reduce_coalesced {name} tensor 1", b, _expected(torch, dt, "SUM", second))

        # gather to rank 0, scatter from the last rank
        outs = [torch.zeros(n, dtype=dt) for _ in range(world)] if rank == 0 else None
        dist.gather(mine, gather_list=outs, dst=0)
        if rank == 0:
            for r in range(world):
                check(f"gather {name} block {r}", outs[r], inputs[r])
        src = world - 1
        blocks = [_input(torch, dt, r + 10, n) for r in range(world)]
        out = torch.zeros(n, dtype=dt)
        dist.scatter(out, scatter_list=blocks if rank == src else None, src=src)
        check(f"scatter {name}", out, blocks[rank])

        # reduce_scatter (list) and _reduce_scatter_base
        per_rank = [[_input(torch, dt, r * world + j, n) for j in range(world)] for r in range(world)]
        out = torch.zeros(n, dtype=dt)
        dist.reduce_scatter(out, per_rank[rank])
        check(f"reduce_scatter {name}", out,
              _expected(torch, dt, "SUM", [per_rank[r][rank] for r in range(world)]))
        out = torch.zeros(n, dtype=dt)
        dist._reduce_scatter_base(out, torch.cat(per_rank[rank]))
        check(f"_reduce_scatter_base {name}", out,
              _expected(torch, dt, "SUM", [per_rank[r][rank] for r in range(world)]))

        # all_to_all_single: equal splits, then unequal (rank r sends j+1 rows to rank j)
        send = torch.cat(per_rank[rank])
        out = torch.zeros(world * n, dtype=dt)
        dist.all_to_all_single(out, send)
        check(f"all_to_all_single {name}", out, torch.cat([per_rank[r][rank] for r in range(world)]))
        rows = lambda r, j: (r + j) % 3 + 1  # noqa: E731
        sends = [torch.cat([_input(torch, dt, 100 * r + j, rows(r, j) * 2).view(-1, 2) for j in range(world)])
                 for r in range(world)]
        in_splits = [rows(rank, j) for j in range(world)]
        out_splits = [rows(r, rank) for r in range(world)]
        out = torch.zeros(sum(out_splits), 2, dtype=dt)
        dist.all_to_all_single(out, sends[rank], out_splits, in_splits)
        want = torch.cat([_input(torch, dt, 100 * r + rank, rows(r, rank) * 2).view(-1, 2) for r in range(world)])
        check(f"all_to_all_single unequal {name}", out, want)

        # all_to_all (lists of different sizes per peer)
        ins = [_input(torch, dt, 10 * rank + j, j + 1) for j in range(world)]
        outs = [torch.zeros(rank + 1, dtype=dt) for _ in range(world)]
        dist.all_to_all(outs, ins)
        for r in range(world):
            check(f"all_to_all {name} from {r}", outs[r], _input(torch, dt, 10 * r + rank, rank + 1))

        # send/recv around the ring (tag by dtype index), recv into a non-contiguous view
        if world > 1:
            nxt, prv = (rank + 1) % world, (rank - 1) % world
            tag = DTYPES.index(name)
            req = dist.isend(mine, dst=nxt, tag=tag)
            big = torch.zeros(n, 3, dtype=dt)
            dist.recv(big[:, 2], src=prv, tag=tag)
            req.wait()
            check(f"send/recv {name}", big[:, 2], inputs[prv])

    # batch_isend_irecv (torch's coalescing manager): both directions of
    # the ring in one batch
    if world > 1:
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        from_prv, from_nxt = torch.zeros(5), torch.zeros(5)
        ops = [dist.P2POp(dist.isend, torch.full((5,), float(rank)), nxt),
               dist.P2POp(dist.irecv, from_prv, prv),
               dist.P2POp(dist.isend, torch.full((5,), float(rank)), prv),
               dist.P2POp(dist.irecv, from_nxt, nxt)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        check("batch_isend_irecv from previous", from_prv, torch.full((5,), float(prv)))
        check("batch_isend_irecv from next", from_nxt, torch.full((5,), float(nxt)))

    # async op on the actor path (beyond the inline size) with a future
    t = torch.full((300007,), float(rank + 1))
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    chained = fut.then(lambda f: f.value()[0] * 2)
    work.wait()
    check("async all_reduce", t, torch.full((300007,), float(world * (world + 1) // 2)))
    check("future value", fut.wait()[0], t)
    check("chained future", chained.wait(), t * 2)
    dist.barrier()

    # recv from any source: every other rank sends its rank to rank 0
    if world > 1:
        if rank == 0:
            seen = set()
            for _ in range(world - 1):
                t = torch.zeros(1, dtype=torch.int64)
                src = dist.recv(t, tag=77)
                if t.item() != src:
                    problems.append(f"recv any source: got {t.item()} from rank {src}")
                seen.add(src)
            if seen != set(range(1, world)):
                problems.append(f"recv any source: senders {sorted(seen)}")
        else:
            dist.send(torch.tensor([rank]), dst=0, tag=77)

    # subgroups: every rank creates both; only members use them
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    last_two = dist.new_group([world - 2, world - 1]) if world > 1 else None
    if rank % 2 == 0:
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=evens)
        check("subgroup evens", t, torch.tensor([float(sum(r for r in range(world) if r % 2 == 0))]))
    if last_two is not None and rank >= world - 2:
        t = torch.tensor([rank])
        dist.broadcast(t, src=world - 1, group=last_two)  # global rank
        check("subgroup broadcast", t, torch.tensor([world - 1]))
    dist.barrier()
    return problems


class OpsTest(unittest.TestCase):
    def run_world(self, world):
        problems = [p for per_rank in harness.run_ranks(ops_matrix, world, deadline=240) for p in per_rank]
        self.assertEqual(problems, [], "\n".join(problems[:40]))

    def test_two_ranks(self):
        self.run_world(2)

    def test_three_ranks(self):
        self.run_world(3)


if __name__ == "__main__":
    unittest.main()
