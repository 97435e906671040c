"""Errors through backend "mccl" surface as Python exceptions carrying
mccl's message: tensors mccl cannot handle (a non-CPU device, an unsupported
dtype, a reduction the dtype lacks, wrong list sizes), ranks that issue
mismatched collectives, the process group's timeout, Work.wait(timeout),
and bad settings in mccl.init()."""

import datetime
import unittest

import harness


def argument_errors_then_timeout(rank, world):
    import time
    import torch
    import torch.distributed as dist
    import mccl

    def message_of(fn):
        try:
            fn()
        except RuntimeError as e:  # MCCLError is a RuntimeError
            return str(e)
        raise AssertionError("no error raised")

    found = {}
    # A tensor that is not on the CPU. This torch has no CUDA, so a meta
    # tensor stands in: mccl refuses anything not on the CPU the same way.
    # (torch's dispatcher answers meta tensors itself, without a backend;
    # these calls go to mccl's backend directly.)
    meta = torch.empty(4, device="meta")
    backend = mccl.backend_of()
    found["device"] = message_of(lambda: backend.allreduce_coalesced([meta]))
    found["device_base"] = message_of(lambda: backend._allgather_base(meta, meta))
    found["dtype"] = message_of(lambda: dist.all_reduce(torch.zeros(4, dtype=torch.float8_e4m3fn)))
    found["redop"] = message_of(lambda: dist.all_reduce(torch.zeros(4), op=dist.ReduceOp.BAND))
    found["list"] = message_of(lambda: dist.all_gather([torch.zeros(2)], torch.zeros(2)))
    found["mccl_error"] = isinstance(
        _raised(lambda: dist.all_reduce(torch.zeros(4, dtype=torch.float8_e4m3fn))), mccl.MCCLError)
    dist.barrier()  # argument errors left the communicator usable

    # The group's timeout (3 s here) bounds an op that rank 1 never joins;
    # Work.wait(timeout) gives up earlier without failing the op.
    if rank == 0:
        work = dist.all_reduce(torch.ones(1 << 20), async_op=True)  # beyond the inline size
        found["wait_timeout"] = message_of(lambda: work.wait(datetime.timedelta(milliseconds=200)))
        start = time.monotonic()
        found["op_timeout"] = message_of(work.wait)
        found["op_timeout_s"] = time.monotonic() - start
    else:
        time.sleep(8)  # stay alive (connected) until rank 0 has timed out
    return found


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 -- the test inspects the type
        return e
    return None


def mismatched_shapes(rank, world):
    import torch
    import torch.distributed as dist
    try:
        dist.all_reduce(torch.ones(4 + rank))
    except RuntimeError as e:
        return str(e)
    return "no error"


def port_base_on_the_store_port(rank, world, port):
    """init_process_group over tcp://127.0.0.1:port with MCCL_PORT_BASE=port
    (the test sets both): mccl must refuse, naming the setting."""
    import time
    import torch.distributed as dist
    import mccl  # noqa: F401
    start = time.monotonic()
    try:
        dist.init_process_group("mccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=20))
    except Exception as e:  # noqa: BLE001 -- the message is what is checked
        return {"error": str(e), "seconds": time.monotonic() - start}
    dist.destroy_process_group()
    return {"error": None}


def join_as(rank, world, port):
    """init_process_group("mccl") over tcp://127.0.0.1:port as `rank` (one
    of two processes started as RANK=1); what happened, with this process's
    pid. The refused one says so in the job's store, and the others keep
    the job (and rank 0's store) up until it has, after one allreduce."""
    import os
    import time
    import torch
    import torch.distributed as dist
    import mccl
    refused_key = "mccl-test/duplicate-refused"

    def job_store():
        return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=30))

    started = time.time()
    try:
        dist.init_process_group("mccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=30))
    except Exception as e:  # noqa: BLE001 -- the refusal is what is checked
        ended = time.time()
        job_store().set(refused_key, "1")
        return {"pid": os.getpid(), "error": str(e), "started": started, "ended": ended,
                "rendezvous_error": isinstance(e, mccl.RendezvousFailedError)}
    # Connected while rank 0, whose process holds the store, is surely up:
    # it is in this job. And it leaves only after every rank has seen the
    # refusal (the barrier): a client that connected after it had gone
    # would retry until its timeout.
    store = job_store()
    t = torch.ones(1)
    dist.all_reduce(t)
    store.wait([refused_key], datetime.timedelta(seconds=60))
    dist.barrier()
    dist.destroy_process_group()
    return {"pid": os.getpid(), "error": None, "sum": t.item(), "started": started}


# A second claim of a rank is refused as soon as rank 0 has published the
# job (counted from when both it and rank 0 had started init_process_group):
# far below the connect timeout (MCCL_CONNECT_TIMEOUT_MS=60000 here).
DUPLICATE_BOUND = 10.0


class ErrorsTest(unittest.TestCase):
    def test_argument_errors_and_timeouts(self):
        r0, r1 = harness.run_ranks(argument_errors_then_timeout, 2, pg_timeout=3, deadline=90)
        for found in (r0, r1):
            self.assertIn("is on meta", found["device"])
            self.assertIn("CPU tensors only", found["device"])
            self.assertIn("allreduce_coalesced on rank", found["device"])
            self.assertIn("input is on meta", found["device_base"])
            self.assertIn("not supported", found["dtype"])
            self.assertIn("not defined for dtype float32", found["redop"])
            self.assertIn("output list has 1 tensor(s); expected 2", found["list"])
            self.assertTrue(found["mccl_error"], "argument errors are mccl.MCCLError")
        self.assertIn("200 ms given to wait()", r0["wait_timeout"])
        self.assertIn("timeout", r0["op_timeout"])
        self.assertIn("MCCL_TIMEOUT_MS=3000", r0["op_timeout"])
        self.assertIn("waiting on rank 1", r0["op_timeout"])
        self.assertLess(r0["op_timeout_s"], 30.0)

    def test_mismatched_shapes_fail_on_every_rank(self):
        for text in harness.run_ranks(mismatched_shapes, 2, pg_timeout=20, deadline=90):
            self.assertIn("desync", text)
            self.assertIn("count 4", text)
            self.assertIn("count 5", text)

    def test_port_base_that_covers_the_store_port_is_refused_under_torch(self):
        port = harness.free_port()
        results = harness.run_ranks(port_base_on_the_store_port, 2, port, backend=None, init=None,
                                    env={"MCCL_PORT_BASE": str(port)}, deadline=60)
        for rank, r in enumerate(results):
            self.assertIsNotNone(r["error"], f"rank {rank} accepted MCCL_PORT_BASE on the store's port")
            self.assertIn(f"MCCL_PORT_BASE={port}", r["error"])
            self.assertIn("MASTER_PORT", r["error"])
            self.assertLess(r["seconds"], 15.0, r)

    def test_bad_settings_are_refused_naming_them(self):
        import mccl
        with self.assertRaises(mccl.MCCLError) as bad_value:
            mccl.init(chunk_bytes="12Q")
        self.assertIn("MCCL_CHUNK_BYTES", str(bad_value.exception))
        with self.assertRaises(ValueError) as unknown:
            mccl.init(chunk_byte="1M")
        self.assertIn("did you mean chunk_bytes", str(unknown.exception))
        # A rejected call applies nothing, also not its valid values.
        with self.assertRaises(mccl.MCCLError):
            mccl.init(spin_us=10, chunk_bytes="12Q")
        self.assertNotIn("MCCL_SPIN_US", mccl.config.explicit_settings())


class DuplicateRankTest(unittest.TestCase):
    def test_duplicate_rank_under_torch_is_refused_naming_both_processes(self):
        # Two processes start as RANK=1 of a 3-rank job beside ranks 0 and
        # 2, all at once: whichever claims rank 1 second is refused, naming
        # the rank and both processes; the job runs with the other.
        port = harness.free_port()
        order = [0, 1, 1, 2]
        got = harness.run_ranks(join_as, 3, port, backend=None, init=None, ranks=order, deadline=120,
                                env={"MCCL_CONNECT_TIMEOUT_MS": "60000"}, allow_failures=True)
        for i, (ok, value) in got.items():
            self.assertTrue(ok, f"process {i} (rank {order[i]}) raised outside init:\n{value}")
        results = [got[i][1] for i in range(len(order))]
        refused = [i for i in (1, 2) if results[i]["error"] is not None]
        self.assertEqual(len(refused), 1, results)
        loser = results[refused[0]]
        winner = results[3 - refused[0]]
        took = loser["ended"] - max(loser["started"], results[0]["started"])
        print(f"  the second RANK=1 was refused {took:.2f} s after it and rank 0 had both started: "
              f"{loser['error']}", flush=True)
        self.assertTrue(loser["rendezvous_error"], loser["error"])
        self.assertRegex(loser["error"],
                         rf"rank 1 is claimed twice: pid {winner['pid']} on \S+ .*holds it; this process "
                         rf"\(pid {loser['pid']} on \S+.*\) is a second RANK=1")
        self.assertLess(took, DUPLICATE_BOUND, loser["error"])
        for i in (0, 3 - refused[0], 3):
            self.assertIsNone(results[i]["error"], results[i])
            self.assertEqual(results[i]["sum"], 3.0, results[i])


if __name__ == "__main__":
    unittest.main()
