"""mccl.init() / MCCLConfig against the environment and the process group's
timeout, and the metrics summary, through backend "mccl" on 2 ranks."""

import unittest

import harness


def config_precedence(rank, world, init_method):
    import datetime
    import os
    import torch.distributed as dist
    import mccl

    seen = {}
    # The environment (MCCL_TIMEOUT_MS=7000, set by the test) beats the
    # group's timeout; MCCL_CHUNK_BYTES from the environment is overridden
    # from Python.
    mccl.init(mccl.MCCLConfig(chunk_bytes="2M"), spin_us=20)
    cfg = mccl.get_config()
    seen["chunk_bytes"] = cfg["chunk_bytes"]
    seen["spin_us"] = cfg["spin_us"]
    seen["timeout_env"] = cfg["timeout_ms"]
    dist.init_process_group("mccl", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    seen["default_group"] = mccl.backend_of().op_timeout_ms
    # Python beats the environment.
    mccl.init(timeout_ms=4321)
    seen["python_group"] = mccl.backend_of(dist.new_group([0, 1])).op_timeout_ms
    # Neither set: the group's own timeout is the op deadline.
    mccl.reset_config()
    del os.environ["MCCL_TIMEOUT_MS"]
    seen["plain_group"] = mccl.backend_of(dist.new_group([0, 1], timeout=datetime.timedelta(seconds=42))).op_timeout_ms
    dist.destroy_process_group()
    return seen


def metrics(rank, world):
    import torch
    import torch.distributed as dist
    import mccl

    mccl.reset_metrics()
    for _ in range(3):
        dist.all_reduce(torch.ones(1024))
    dist.all_reduce(torch.ones(1 << 20))
    dist.broadcast(torch.ones(16), src=0)
    m = mccl.get_metrics()
    # log_metrics writes to stderr through mccl's logger, at the default
    # log level (WARN) too: catch fd 2 in a file.
    import os
    import sys
    import tempfile
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(err.fileno(), 2)
        try:
            line = mccl.log_metrics()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        logged = err.read().decode()
    attrs = {"total_ops": m.total_ops, "p50": m.p50_latency_ms, "p99": m.p99_latency_ms,
             "peak": m.peak_throughput_gbps, "errors": m.errors, "wire_bytes": m.wire_bytes,
             "allreduce_ops": m.ops["allreduce"].ops, "allreduce_algos": m.ops["allreduce"].algorithms,
             "links": [(l.peer, l.bytes_sent, l.bytes_received, l.retransmits, l.reconnects)
                       for l in m.links]}
    try:
        m.no_such_field
        attrs["unknown_field"] = "accepted"
    except AttributeError as e:
        attrs["unknown_field"] = str(e)
    as_dict = dict(m)
    plain = m.to_dict()
    mccl.reset_metrics()
    return m.to_dict(), line, logged, attrs, sorted(as_dict), plain, mccl.get_metrics().to_dict()


def _init_after_group(rank, world):
    import warnings
    import mccl
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mccl.init(compression="fp16")
    mccl.reset_config()
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


class ConfigTest(unittest.TestCase):
    def test_python_beats_environment_beats_group_timeout(self):
        env = {"MCCL_TIMEOUT_MS": "7000", "MCCL_CHUNK_BYTES": "512K"}
        for seen in harness.run_ranks(config_precedence, 2, harness.file_init_url(), backend=None,
                                      env=env, deadline=90):
            self.assertEqual(seen["chunk_bytes"], ("2M", "explicit"))
            self.assertEqual(seen["spin_us"], ("20", "explicit"))
            self.assertEqual(seen["timeout_env"], ("7000", "environment"))
            self.assertEqual(seen["default_group"], 7000)
            self.assertEqual(seen["python_group"], 4321)
            self.assertEqual(seen["plain_group"], 42000)

    def test_config_object_refuses_unknown_names(self):
        import mccl
        with self.assertRaises(ValueError):
            mccl.MCCLConfig(chunk_size="1M")
        c = mccl.MCCLConfig(algo="allreduce=ring")
        self.assertEqual(c.items(), [("algo", "allreduce=ring")])
        self.assertIn("chunk_bytes", mccl.MCCLConfig.describe())

    def test_config_object_refuses_bad_values_when_built_and_changes_nothing(self):
        import mccl
        mccl.reset_config()
        mccl.init(chunk_bytes="2M")
        try:
            with self.assertRaises(mccl.InvalidConfigError) as caught:
                mccl.MCCLConfig(transport="foo")
            self.assertIn("MCCL_TRANSPORT", str(caught.exception))
            c = mccl.MCCLConfig()
            with self.assertRaises(mccl.InvalidConfigError):
                c.chunk_bytes = "lots"
            # Checking a value left the settings made before as they were.
            explicit = [k for k, (_, source) in mccl.get_config().items() if source == "explicit"]
            self.assertEqual(explicit, ["chunk_bytes"])
        finally:
            mccl.reset_config()

    def test_init_after_init_process_group_warns(self):
        warned = harness.run_ranks(_init_after_group, 2, deadline=90)
        for w in warned:
            self.assertEqual(len(w), 1, w)
            self.assertIn("compression='fp16'", w[0])
            self.assertIn("after torch.distributed.init_process_group", w[0])


class MetricsTest(unittest.TestCase):
    def test_summary_counts_what_ran(self):
        # The 4 MiB allreduce over the link (not the host board's stage),
        # whose counters the test reads.
        for m, line, logged, attrs, keys, plain, after in harness.run_ranks(
                metrics, 2, deadline=90, env={"MCCL_SHM_STAGE_BYTES": "0"}):
            self.assertEqual(m["total_ops"], 5)
            self.assertEqual(m["errors"], 0)
            self.assertEqual(m["total_bytes"], 3 * 1024 * 4 + (1 << 20) * 4 + 16 * 4)
            self.assertEqual(sum(m["algorithms"]["allreduce"].values()), 4)
            self.assertEqual(sum(m["algorithms"]["broadcast"].values()), 1)
            self.assertGreater(m["p50_latency_ms"], 0)
            self.assertGreaterEqual(m["p99_latency_ms"], m["p50_latency_ms"])
            self.assertGreater(m["peak_throughput_gbps"], 0)
            self.assertIn("5 ops", line)
            self.assertIn("5 ops", logged)
            self.assertIn("metrics: ", logged)
            self.assertEqual(after["total_ops"], 0)
            self.assertEqual(after["algorithms"], {})
            # The object's attributes are the dict's values.
            self.assertEqual(attrs["total_ops"], 5)
            self.assertEqual(attrs["errors"], 0)
            self.assertEqual(attrs["allreduce_ops"], 4)
            self.assertEqual(sum(attrs["allreduce_algos"].values()), 4)
            self.assertGreater(attrs["p99"], 0)
            self.assertIn("total_ops", keys)
            self.assertIn("links", keys)
            self.assertEqual(plain["ops"]["broadcast"]["ops"], 1)
            # Uncompressed ops sent payload on the wire; the one link to
            # the other rank carried it, nothing retransmitted.
            self.assertGreater(attrs["wire_bytes"], 0)
            self.assertEqual(len(attrs["links"]), 1)
            peer, sent, received, retransmits, reconnects = attrs["links"][0]
            self.assertGreater(sent, 0)
            self.assertGreater(received, 0)
            self.assertEqual((retransmits, reconnects), (0, 0))
            self.assertIn("no field 'no_such_field'", attrs["unknown_field"])


if __name__ == "__main__":
    unittest.main()
