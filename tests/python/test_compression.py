"""Compression and the MCCL documentation's init options through backend
"mccl" on 2 ranks: the options run as written, bad values fail at
mccl.init, and the DDP compression hook averages gradients within the
float16 rounding bound with the same bits on every rank."""

import unittest

import harness

COUNT = 100003  # float32: 400 KB, above MCCL_SMALL_MSG_THRESHOLD (64K and 128K)


def _inputs(rank):
    import torch
    g = torch.Generator().manual_seed(100 + rank)
    return torch.rand(COUNT, generator=g) * 2 - 1


def _allreduce_outcome(rank, world):
    """The sum, its largest error against the exact one, and whether any
    element differs from the float32 sum (compression happened)."""
    import torch
    import torch.distributed as dist
    t = _inputs(rank)
    dist.all_reduce(t)
    exact = sum(_inputs(r).double() for r in range(world))
    err = (t.double() - exact).abs().max().item()
    bound = (world + 1) * 2.0 ** -11 * sum(_inputs(r).double().abs() for r in range(world))
    within = bool(((t.double() - exact).abs() <= bound).all())
    float32_sum = sum(_inputs(r) for r in range(world))
    return {"within": within, "err": err, "inexact": bool((t != float32_sum).any()),
            "bits": t.numpy().tobytes()}


def documented_init(rank, world, form, init_method):
    import os
    import sys
    import tempfile
    import torch.distributed as dist
    import mccl

    # stderr into a file, to count mccl's log lines.
    log = tempfile.NamedTemporaryFile(prefix="mccl-log-", delete=False)
    os.dup2(log.fileno(), 2)
    if form == "init_kwargs":
        mccl.init(compression="fp16", fast_math=True, listen_addr="127.0.0.1")
    elif form == "config_object":
        mccl.init(mccl.MCCLConfig(compression="fp16", gpu_threshold=8192, small_msg_threshold=131072,
                                  log_level="INFO"))
    # form "environment": MCCL_* variables set by the test.
    dist.init_process_group("mccl", init_method=init_method, rank=rank, world_size=world)
    out = _allreduce_outcome(rank, world)
    dist.new_group([0, 1])  # a second communicator: the note is not repeated
    dist.destroy_process_group()
    sys.stderr.flush()
    with open(log.name, errors="replace") as f:
        text = f.read()
    os.unlink(log.name)
    out["no_effect_notes"] = text.count("settings of MCCL's GPU backend")
    return out


def bad_values(rank, world):
    import mccl
    errors = {}
    for key, value in (("transport", "infiniband"), ("fast_math", "maybe"),
                       ("gpu_threshold", "lots"), ("compression", "zstd")):
        try:
            mccl.init(**{key: value})
            errors[key] = None
        except mccl.MCCLError as e:
            errors[key] = str(e)
    return errors


def ddp_step(rank, world, hook):
    import torch
    import torch.distributed as dist
    import mccl

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    if hook:
        ddp.register_comm_hook(None, mccl.hooks.compression_hook(hook))
    g = torch.Generator().manual_seed(7 + rank)
    x = torch.randn(32, 256, generator=g)
    ddp(x).square().mean().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    # The exact average: each rank's own gradient, recomputed without DDP,
    # gathered exactly (all_gather is never compressed by the hook).
    local = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64))
    local.load_state_dict(model.state_dict())
    local(x).square().mean().backward()
    mine = [p.grad for p in local.parameters()]
    avg = []
    for gr in mine:
        parts = [torch.empty_like(gr) for _ in range(world)]
        dist.all_gather(parts, gr)
        avg.append(sum(p.double() for p in parts) / world)
    worst = max((a - b.double()).abs().max().item() for a, b in zip(avg, grads))
    scale = max(gr.abs().max().item() for gr in mine)
    return {"worst": worst, "scale": scale,
            "bits": b"".join(gr.numpy().tobytes() for gr in grads)}


class DocumentedInitTest(unittest.TestCase):
    def check_compressed_sum(self, results):
        for r in results:
            self.assertTrue(r["within"], r["err"])
            self.assertTrue(r["inexact"], "every element exact: no compression?")
        self.assertEqual(results[0]["bits"], results[1]["bits"])

    def test_init_keywords_as_documented(self):
        res = harness.run_ranks(documented_init, 2, "init_kwargs", harness.file_init_url(),
                                backend=None, deadline=120)
        self.check_compressed_sum(res)
        for r in res:
            self.assertEqual(r["no_effect_notes"], 0)  # log level WARN: INFO notes not shown

    def test_config_object_as_documented(self):
        res = harness.run_ranks(documented_init, 2, "config_object", harness.file_init_url(),
                                backend=None, deadline=120)
        self.check_compressed_sum(res)
        for r in res:
            self.assertEqual(r["no_effect_notes"], 1)  # once per process, at INFO

    def test_environment_variables_as_documented(self):
        env = {"MCCL_FAST_MATH": "0", "MCCL_GPU_THRESHOLD": "8192",
               "MCCL_SHADER_PATH": "/opt/mccl/shaders", "MCCL_COMPRESSION": "fp16",
               "MCCL_LOG_LEVEL": "INFO"}
        res = harness.run_ranks(documented_init, 2, "environment", harness.file_init_url(),
                                backend=None, env=env, deadline=120)
        self.check_compressed_sum(res)
        for r in res:
            self.assertEqual(r["no_effect_notes"], 1)

    def test_bad_values_fail_at_init_naming_the_setting(self):
        errors = bad_values(0, 1)
        for key, text in errors.items():
            self.assertIsNotNone(text, f"{key} accepted")
            self.assertIn("MCCL_" + key.upper(), text)


def ddp_step_both_ways(rank, world):
    return {"fp16": ddp_step(rank, world, "fp16"), "none": ddp_step(rank, world, None)}


class DdpHookTest(unittest.TestCase):
    # One process group takes a step both ways (a fresh DDP each): a spawn
    # costs seconds here.
    @classmethod
    def setUpClass(cls):
        cls.per_rank = harness.run_ranks(ddp_step_both_ways, 2, deadline=120)

    def test_fp16_hook_is_within_rounding_and_ranks_agree(self):
        res = [r["fp16"] for r in self.per_rank]
        scale = max(r["scale"] for r in res)  # the largest gradient element of any rank
        for r in res:
            # Two ranks: each element is rounded at most 3 times (2^-11 each).
            self.assertLessEqual(r["worst"], 3 * 2.0 ** -11 * scale, r)
            self.assertGreater(r["worst"], 0, "the hook's gradients are exact: no compression?")
        self.assertEqual(res[0]["bits"], res[1]["bits"])

    def test_without_the_hook_gradients_are_exact_averages(self):
        res = [r["none"] for r in self.per_rank]
        scale = max(r["scale"] for r in res)
        for r in res:
            self.assertLessEqual(r["worst"], 1e-6 * scale, r)


def train_topk(rank, world, mode, steps=300, lr=4.0):
    """Linear regression whose features span scales 0.2..1, trained with DDP:
    `mode` "exact" (no hook), "ef" (topk 0.01 with error feedback) or
    "noef" (topk 0.01 without). Small-scale features have small gradients:
    top-k alone never sends them; with feedback their residual grows until
    it is sent. Returns the loss on a held-out set (labels with noise of
    variance 0.25, the floor)."""
    import torch
    import mccl

    torch.manual_seed(1234)
    d_in, d_out = 128, 136  # 17408 weights: one 68 KiB bucket, above the small-op threshold
    scale = torch.linspace(0.2, 1.0, d_in)
    teacher = torch.randn(d_in, d_out)
    model = torch.nn.Linear(d_in, d_out, bias=False)
    torch.nn.init.zeros_(model.weight)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    if mode != "exact":
        ddp.register_comm_hook(None, mccl.hooks.compression_hook("topk", ratio=0.01,
                                                                 error_feedback=mode == "ef"))
    opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(64, d_in, generator=g) * scale
        y = x @ teacher + 0.5 * torch.randn(64, d_out, generator=g)
        opt.zero_grad()
        ((ddp(x) - y) ** 2).mean().backward()
        opt.step()
    ge = torch.Generator().manual_seed(9)
    xe = torch.randn(2048, d_in, generator=ge) * scale
    ye = xe @ teacher + 0.5 * torch.randn(2048, d_out, generator=ge)
    with torch.no_grad():
        return ((model(xe) - ye) ** 2).mean().item()


def train_each_mode(rank, world):
    return {mode: train_topk(rank, world, mode) for mode in ("exact", "ef", "noef")}


class TopkTrainingTest(unittest.TestCase):
    """topk 0.01 with error feedback trains as well as exact averaging in
    the same number of steps (within 5 %); without feedback it does far
    worse: that is why the feedback exists."""

    def check_world(self, world):
        # One process group trains all three, one after the other (each
        # from the same seed and a fresh DDP): a spawn costs seconds here.
        per_rank = harness.run_ranks(train_each_mode, world, deadline=240)
        loss = {mode: [r[mode] for r in per_rank] for mode in ("exact", "ef", "noef")}
        for mode, per_rank in loss.items():
            self.assertEqual(len(set(per_rank)), 1, f"{mode}: ranks ended with different models")
        exact, ef, noef = loss["exact"][0], loss["ef"][0], loss["noef"][0]
        print(f"\n{world} ranks, held-out loss after 300 steps: exact {exact:.4f}, topk 0.01 with "
              f"feedback {ef:.4f} ({ef / exact:.3f}x), without {noef:.4f} ({noef / exact:.1f}x)")
        self.assertLessEqual(ef, 1.05 * exact, loss)
        self.assertGreater(noef, 2 * exact, loss)

    def test_two_ranks(self):
        self.check_world(2)

    def test_four_ranks(self):
        self.check_world(4)


if __name__ == "__main__":
    unittest.main()
