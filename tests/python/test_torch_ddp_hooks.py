"""DistributedDataParallel with torch's own communication hooks over backend
"mccl", on 2 ranks: fp16_compress_hook, bf16_compress_hook and PowerSGD
(powerSGD_hook), beside DDP without a hook.

Every variant trains the same small MLP from the same seed on the same
global batches (each rank its half). Checked:
- mccl's parameters after the steps match gloo's, variant by variant (the
  hooks' own arithmetic is identical; only the backend's sums differ);
- DDP without a hook matches one process training on the whole batch;
- the fp16/bf16 hooks stay within their format's rounding of that
  single-process result, and PowerSGD (a rank-1 approximation) moves away
  from it: the hooks really ran;
- every rank ends with the same parameters.
"""

import unittest

import harness

STEPS = 6
BATCH = 8
LR = 0.1
VARIANTS = ("none", "fp16", "bf16", "powersgd")


def build_model():
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


def batch(step):
    import torch
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(BATCH, 16, generator=g), torch.randn(BATCH, 4, generator=g)


def flat(model):
    import torch
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def train_variant(variant, rank, world):
    import torch
    import torch.nn.functional as F
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

    ddp = torch.nn.parallel.DistributedDataParallel(build_model())
    if variant == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif variant == "bf16":
        # DDP refuses bf16_compress_hook by its name unless CUDA + NCCL or
        # XPU + XCCL are present (for gloo too); the same function under
        # another name runs.
        def bf16_hook(state, bucket):
            return default_hooks.bf16_compress_hook(state, bucket)
        ddp.register_comm_hook(None, bf16_hook)
    elif variant == "powersgd":
        # Vanilla allreduce for the first 2 steps, then rank-1 compression of
        # every weight matrix (biases travel uncompressed).
        state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                                   start_powerSGD_iter=2, min_compression_rate=1.5)
        ddp.register_comm_hook(state, psgd.powerSGD_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    per_rank = BATCH // world
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad(set_to_none=True)
        F.mse_loss(ddp(x[mine]), y[mine]).backward()
        opt.step()
    return flat(ddp.module).tolist()


def bf16_refusal():
    """What registering torch's bf16_compress_hook itself says on this
    CPU build of torch (None when it registers)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    ddp = __import__("torch").nn.parallel.DistributedDataParallel(build_model())
    try:
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    except TypeError as e:
        return str(e)
    return None


def train_all(rank, world):
    import torch
    torch.set_num_threads(1)
    report = {v: train_variant(v, rank, world) for v in VARIANTS}
    report["bf16_refusal"] = bf16_refusal()
    return report


def single_process():
    import torch
    import torch.nn.functional as F
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad(set_to_none=True)
        F.mse_loss(model(x), y).backward()
        opt.step()
    return flat(model)


class DdpHooksTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        cls.runs, cls.refusals = {}, {}
        for backend in ("mccl", "gloo"):
            per_rank = harness.run_ranks(train_all, 2, backend=backend, deadline=150)
            for variant in VARIANTS:
                for other in per_rank[1:]:
                    # DDP keeps replicas identical, whatever the hook.
                    assert other[variant] == per_rank[0][variant], f"{backend} {variant}: replicas differ"
            cls.runs[backend] = {v: torch.tensor(per_rank[0][v]) for v in VARIANTS}
            cls.refusals[backend] = per_rank[0]["bf16_refusal"]
        cls.reference = single_process()
        cls.initial = flat(build_model())

    def max_diff(self, a, b):
        return (a - b).abs().max().item()

    def test_training_moved_the_parameters(self):
        self.assertGreater(self.max_diff(self.reference, self.initial), 1e-2)

    def test_mccl_matches_gloo_for_every_hook(self):
        # Two ranks' sums are the same whichever order they are taken in
        # (bit for bit here, with 2.13); the bounds allow one 16-bit
        # rounding of a sum to land on a neighbouring value.
        tolerance = {"none": 1e-6, "fp16": 1e-5, "bf16": 1e-4, "powersgd": 1e-5}
        for v in VARIANTS:
            d = self.max_diff(self.runs["mccl"][v], self.runs["gloo"][v])
            self.assertLessEqual(d, tolerance[v], f"{v}: mccl and gloo differ by {d}")

    def test_no_hook_matches_one_process(self):
        d = self.max_diff(self.runs["mccl"]["none"], self.reference)
        self.assertLess(d, 1e-5, f"DDP over mccl and one process differ by {d}")

    def test_compression_hooks_stay_within_their_rounding(self):
        # fp16 keeps 11 significant bits, bf16 8: six steps of gradients
        # rounded that way moved parameters by 3e-5 (fp16) and 2e-4 (bf16)
        # from the exact result, and by more than float32 rounding would.
        for v, bound in (("fp16", 2e-4), ("bf16", 2e-3)):
            d = self.max_diff(self.runs["mccl"][v], self.reference)
            self.assertLess(d, bound, f"{v}: {d} from one process")
            self.assertGreater(d, 0.0, f"{v}: no rounding at all; did the hook run?")

    def test_bf16_hook_is_refused_by_name_without_cuda(self):
        # torch's DDP, not the backend: gloo gets the same refusal.
        import torch
        for backend in ("mccl", "gloo"):
            refusal = self.refusals[backend]
            if torch.version.cuda is None and torch.version.hip is None:
                self.assertEqual(refusal, "BF16 all reduce communication hook required CUDA 11+ "
                                          "and NCCL 2.10+ or XPU and XCCL")
            else:
                self.assertIsNone(refusal)

    def test_powersgd_compresses(self):
        d = self.max_diff(self.runs["mccl"]["powersgd"], self.reference)
        # A rank-1 approximation of 32x32 gradients (with error feedback)
        # is visibly not the exact average, yet still trains.
        self.assertGreater(d, 1e-3, "PowerSGD equals the uncompressed result")
        moved = self.max_diff(self.runs["mccl"]["powersgd"], self.initial)
        self.assertGreater(moved, 1e-2, "PowerSGD: parameters did not move")


if __name__ == "__main__":
    unittest.main()
