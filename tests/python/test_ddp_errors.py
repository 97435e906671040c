"""Errors that travel through DDP reach Python as mccl's classes: 3 ranks
train a small model with DistributedDataParallel over backend "mccl"; rank
2 SIGKILLs itself between the forward and the backward pass of step 3, so
the survivors are inside backward()'s gradient allreduce when it dies.

Checked on both survivors, for DDP without a hook (torch's reducer and its
C++ future chain), mccl's compression hook, a hook chained with
mccl.hooks.then, and torch's own allreduce_hook wrapped in
mccl.hooks.keep_mccl_errors (whose Future.then keeps only the text):

- backward() raises mccl.PeerLostError (an mccl.MCCLError, code 8) with
  mccl's own message ("mccl: peer_lost: allreduce seq N on rank R ...")
  naming the lost rank 2;
- the lost rank revoked the communicator: a direct all_reduce afterwards
  raises mccl.RevokedError (code 14), whose message names rank 2 too;
- it does so within FAILURE_BOUND seconds of the kill (the process group's
  timeout is far longer, so the watchdog's deadline cannot be what fired).

Every run has the harness's hard deadline; the killed rank is reaped and any
rank still alive at the deadline is killed.
"""

import os
import tempfile
import time
import unittest

import harness

WORLD = 3
VICTIM = 2
KILL_AT_STEP = 3
# A SIGKILLed peer is named within about 0.2 s here; a loaded 2-core CI
# machine gets ample room, still far below the 60 s process group timeout.
FAILURE_BOUND = 10.0
PG_TIMEOUT = 60.0
VARIANTS = ("no_hook", "mccl_fp16_hook", "then_hook", "torch_hook_wrapped")


def register_hook(ddp, variant, world):
    import torch.distributed as dist
    import mccl
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    if variant == "mccl_fp16_hook":
        ddp.register_comm_hook(None, mccl.hooks.compression_hook("fp16"))
    elif variant == "then_hook":
        def average(state, bucket):
            fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
            return mccl.hooks.then(fut, lambda f: f.value()[0].div_(world))
        ddp.register_comm_hook(None, average)
    elif variant == "torch_hook_wrapped":
        ddp.register_comm_hook(None, mccl.hooks.keep_mccl_errors(default_hooks.allreduce_hook))


def direct_all_reduce_error():
    """What a direct all_reduce raises now, on the communicator that lost
    rank 2: (class name, message)."""
    import torch
    import torch.distributed as dist
    try:
        dist.all_reduce(torch.ones(4))
    except Exception as e:  # noqa: BLE001 -- its class is what is checked
        return type(e).__name__, str(e)
    return None, "the all_reduce succeeded"


def train_until_a_rank_dies(rank, world, variant, stamp_dir):
    import signal
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import mccl

    torch.set_num_threads(1)
    torch.manual_seed(0)
    # Buckets above mccl's inline size: the ops run on mccl's op thread,
    # and DDP's reducer waits on their futures.
    model = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    register_hook(ddp, variant, world)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(8, 64), torch.randn(8, 4)
    for step in range(1000):
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(ddp(x), y)
        if rank == VICTIM and step == KILL_AT_STEP:
            with open(os.path.join(stamp_dir, "killed"), "w") as f:
                f.write(repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            loss.backward()
        except Exception as e:  # noqa: BLE001 -- its class is what is checked
            at = time.time()
            return {"step": step, "at": at, "class": type(e).__name__,
                    "is_mccl_error": isinstance(e, mccl.MCCLError),
                    "is_peer_lost": isinstance(e, mccl.PeerLostError),
                    "code": getattr(e, "code", None), "message": str(e),
                    "direct": direct_all_reduce_error()}
        opt.step()
    return {"step": None, "message": "trained 1000 steps without an error"}


class DdpErrorsTest(unittest.TestCase):
    def run_variant(self, variant):
        with tempfile.TemporaryDirectory(prefix="mccl-ddp-errors-") as stamps:
            started = time.monotonic()
            got = harness.run_ranks(train_until_a_rank_dies, WORLD, variant, stamps,
                                    pg_timeout=PG_TIMEOUT, deadline=120, allow_failures=True)
            took = time.monotonic() - started
            with open(os.path.join(stamps, "killed")) as f:
                killed_at = float(f.read())
        ok, value = got[VICTIM]
        self.assertFalse(ok, f"rank {VICTIM} should have been killed, it returned {value}")
        self.assertIn("status -9", value)
        for rank in range(WORLD):
            if rank == VICTIM:
                continue
            ok, found = got[rank]
            self.assertTrue(ok, f"rank {rank} failed outside backward():\n{found}")
            self.assertEqual(found["step"], KILL_AT_STEP, found["message"])
            self.assertEqual(found["class"], "PeerLostError", found["message"])
            self.assertTrue(found["is_mccl_error"] and found["is_peer_lost"], found)
            self.assertEqual(found["code"], 8, found)
            self.assertRegex(found["message"], rf"^mccl: peer_lost: .*\blost rank {VICTIM}\b")
            # The lost rank revoked the communicator: a direct op is refused,
            # naming why.
            self.assertEqual(found["direct"][0], "RevokedError", found["direct"][1])
            self.assertRegex(found["direct"][1], rf"^mccl: revoked: .*\blost rank {VICTIM}\b")
            self.assertNotIn("Got the following error", found["message"])
            after = found["at"] - killed_at
            print(f"  {variant}: rank {rank} raised {found['class']} {after:.2f} s after rank "
                  f"{VICTIM} was killed (run {took:.1f} s)", flush=True)
            self.assertLess(after, FAILURE_BOUND, found["message"])

    def test_ddp_without_a_hook(self):
        self.run_variant("no_hook")

    def test_mccl_compression_hook(self):
        self.run_variant("mccl_fp16_hook")

    def test_hook_chained_with_mccl_then(self):
        self.run_variant("then_hook")

    def test_torch_hook_wrapped_in_keep_mccl_errors(self):
        self.run_variant("torch_hook_wrapped")


if __name__ == "__main__":
    unittest.main()
