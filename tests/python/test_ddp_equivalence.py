"""DistributedDataParallel over mccl and over gloo, from the same seed and
data, ends with the same parameters after 20 steps (float32 tolerance), on
2 and 3 ranks. The model and training loop are examples/ddp_dummy_train.py's
at a tiny width, so this also covers that example."""

import os
import sys
import unittest

import harness

sys.path.insert(0, os.path.join(harness.HERE, "..", "..", "examples"))

STEPS = 20
# A tiny version of the example's model; global batch 6 splits over 2 and 3.
TINY = ["--width", "32", "--depth", "2", "--heads", "4", "--image", "8", "--batch", "6",
        "--steps", str(STEPS), "--warmup", "0", "--threads", "1"]


def train_ranks(rank, world):
    import torch
    import ddp_dummy_train
    stats, model = ddp_dummy_train.train(ddp_dummy_train.parse_args(TINY), rank, world)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    # Lists, not tensors: tensors would travel through shared memory that
    # goes away with the rank's process.
    return params.tolist(), stats["loss"]


class DdpEquivalenceTest(unittest.TestCase):
    def compare(self, world):
        import math
        import torch
        runs = {}
        for backend in ("gloo", "mccl"):
            per_rank = harness.run_ranks(train_ranks, world, backend=backend, deadline=120)
            for params, losses in per_rank:
                self.assertEqual(len(losses), STEPS)
                self.assertTrue(all(math.isfinite(x) for x in losses), f"{backend}: {losses}")
            # DDP keeps every rank's replica identical.
            for params, _ in per_rank[1:]:
                self.assertTrue(torch.equal(torch.tensor(params), torch.tensor(per_rank[0][0])),
                                f"{backend}: replicas differ")
            runs[backend] = torch.tensor(per_rank[0][0])
        diff = (runs["mccl"] - runs["gloo"]).abs().max().item()
        # Far below the change 20 steps make, far above float32 rounding
        # of sums taken in a different order.
        moved = (runs["gloo"] - self.initial()).abs().max().item()
        self.assertGreater(moved, 1e-3, "training did not change the parameters")
        self.assertTrue(torch.allclose(runs["mccl"], runs["gloo"], rtol=1e-4, atol=1e-5),
                        f"{world} ranks: mccl and gloo parameters differ by up to {diff}")

    def initial(self):
        import torch
        import ddp_dummy_train
        model = ddp_dummy_train.build_model(ddp_dummy_train.parse_args(TINY))
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    def test_two_ranks(self):
        self.compare(2)

    def test_three_ranks(self):
        self.compare(3)


if __name__ == "__main__":
    unittest.main()
