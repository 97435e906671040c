"""`torchrun --nproc_per_node 2 examples/ddp_dummy_train.py --backend mccl`,
as docs/pytorch.md shows, with a tiny model: torchrun starts the ranks, the
example joins backend "mccl" through env:// and trains with DDP.

Checked against one process: the example's losses (rank 0's, on the first
half of each global batch) equal the losses of one process that trains the
same model on whole batches and measures each step's loss on that half
(float32 tolerance: DDP's averaged gradient is the whole batch's).
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import harness

EXAMPLES = os.path.join(harness.HERE, "..", "..", "examples")
sys.path.insert(0, EXAMPLES)

NPROC = 2
TINY = ["--width", "32", "--depth", "2", "--heads", "4", "--image", "8", "--batch", "4",
        "--steps", "5", "--warmup", "0", "--threads", "1"]


def torchrun():
    # The entry point pip installs beside the interpreter running the tests.
    path = os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(path):
        raise AssertionError(f"no torchrun beside {sys.executable}: torch's install is incomplete")
    return path


def one_process_losses(args):
    """What rank 0 of a DDP run reports: each step's loss on the first
    1/NPROC of the global batch, before the step, with the parameters that
    training on whole batches gives."""
    import torch
    import torch.nn.functional as F
    import ddp_dummy_train as ex
    torch.set_num_threads(1)
    torch.backends.mkldnn.enabled = False  # as the example does
    model = ex.build_model(args)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    per_rank = args.batch // NPROC
    losses = []
    for step in range(args.warmup + args.steps):
        images, labels = ex.global_batch(args, step)
        opt.zero_grad(set_to_none=True)
        out = model(images)
        losses.append(F.cross_entropy(out[:per_rank], labels[:per_rank]).item())
        F.cross_entropy(out, labels).backward()
        opt.step()
    return losses[args.warmup:]


class TorchrunTest(unittest.TestCase):
    def test_ddp_example_under_torchrun(self):
        import ddp_dummy_train as ex
        with tempfile.TemporaryDirectory(prefix="mccl-torchrun-") as d:
            stats_file = os.path.join(d, "stats.json")
            cmd = [torchrun(), "--nproc_per_node", str(NPROC), "--master_port", str(harness.free_port()),
                   os.path.join(EXAMPLES, "ddp_dummy_train.py"), "--backend", "mccl",
                   "--save-stats", stats_file] + TINY
            # The ranks import the mccl this test process imports.
            import mccl
            package_dir = os.path.dirname(os.path.dirname(os.path.abspath(mccl.__file__)))
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (package_dir, env.get("PYTHONPATH")) if p)
            run = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=150)
            self.assertEqual(run.returncode, 0, f"torchrun failed:\n{run.stdout}\n{run.stderr}")
            with open(stats_file) as f:
                stats = json.load(f)
        self.assertEqual(stats["backend"], "mccl")
        self.assertEqual(stats["world_size"], NPROC)
        want = one_process_losses(ex.parse_args(TINY))
        self.assertEqual(len(stats["loss"]), len(want))
        for step, (got, ref) in enumerate(zip(stats["loss"], want)):
            self.assertAlmostEqual(got, ref, delta=1e-5 * max(1.0, abs(ref)),
                                   msg=f"step {step}: torchrun over mccl {got}, one process {ref}")
        # The losses change: the parameters were trained.
        self.assertGreater(abs(want[-1] - want[0]), 1e-4)


if __name__ == "__main__":
    unittest.main()
