#!/usr/bin/env python3
"""Setup that names its cause, fast, and refuses strangers, across real
processes (mccl_check over loopback TCP).

* A rank that never starts: every started rank fails within the connect
  timeout (plus FAIL_MARGIN) naming it.
* Rank 0 killed during setup: the others fail within FAST_BOUND naming it.
* One rank fails setup (a WORLD_SIZE mismatch, a setting that must agree):
  the others fail within FAST_BOUND, long before the connect timeout,
  naming that rank and the cause; rank 0's error included.
* MCCL_PORT_BASE on MASTER_PORT: every rank refuses, with the message
  docs/troubleshooting.md shows.
* A second process with the same RANK, or a rank of another job
  (MCCL_JOB_ID) on the same MASTER_PORT: refused, naming both processes;
  the job itself runs to the end with every result checked.
* An open-file limit (RLIMIT_NOFILE) below what the links need: every rank
  refuses at once naming the limit, the need and `ulimit -n`; a soft limit
  below it with room under the hard one is raised and the job runs its
  checked ops.

Set MCCL_CHECK to the mccl_check binary (the ctest entry does).
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from faults_test import MCCL_CHECK, STARTUP_TIMEOUT, Rank, free_port, stop_ranks  # noqa: E402
from security_test import connect_store  # noqa: E402

# Long enough that failing "at once" cannot be the timeout doing it.
LONG_TIMEOUT_MS = 30000
# A failure relayed through the store: it is polled every 250 ms.
FAST_BOUND = 5.0
SHORT_TIMEOUT_MS = 2000
FAIL_MARGIN = 3.0
JOB_TIMEOUT = 60.0


class SetupErrorsTest(unittest.TestCase):
    def setUp(self):
        if not os.access(MCCL_CHECK, os.X_OK):
            raise AssertionError(f"mccl_check not found at {MCCL_CHECK}; build it or set MCCL_CHECK")
        self.ranks = []
        self.addCleanup(self.close_all)

    def close_all(self):
        stop_ranks(self.ranks)
        self.ranks = []

    def start(self, rank, world, port, env=None, mode=("barrier",)):
        full = {"MCCL_TRANSPORT": "tcp", "MCCL_CONNECT_TIMEOUT_MS": str(LONG_TIMEOUT_MS)}
        full.update(env or {})
        r = Rank(rank, world, port, list(mode), full)
        self.ranks.append(r)
        return r

    def everything(self):
        return "\n".join(r.describe() for r in self.ranks)

    def expect_failure(self, ranks, since, bound, *patterns):
        """Every rank of `ranks` exits non-zero within `bound` s of `since`
        and its stderr matches every pattern."""
        for r in ranks:
            r.wait_exit(max(0.0, since + bound + 5.0 - time.monotonic()))
        for r in ranks:
            self.assertIsNotNone(r.exit_time, f"rank {r.rank} still running:\n" + self.everything())
            took = r.exit_time - since
            err = r.output("stderr")
            last = [line for line in err.splitlines() if line.startswith("mccl_check:")]
            print(f"  rank {r.rank} failed after {took:.2f} s: {last[-1] if last else err[-300:]}",
                  file=sys.stderr, flush=True)
            self.assertNotEqual(r.returncode, 0, self.everything())
            self.assertLess(took, bound, self.everything())
            for p in patterns:
                self.assertRegex(err, p, r.describe())

    # 4 ------------------------------------------------------------------

    def test_missing_rank_is_named_by_every_started_rank(self):
        for missing in (2, 1):
            with self.subTest(missing=missing):
                try:
                    port = free_port()
                    since = time.monotonic()
                    present = [self.start(r, 3, port, {"MCCL_CONNECT_TIMEOUT_MS": str(SHORT_TIMEOUT_MS)})
                               for r in range(3) if r != missing]
                    self.expect_failure(present, since, SHORT_TIMEOUT_MS / 1000 + FAIL_MARGIN,
                                        rf"rank\(s\) {missing} of WORLD_SIZE=3 never joined the rendezvous")
                finally:
                    self.close_all()

    def test_rank0_killed_during_setup_is_named(self):
        port = free_port()
        rank0 = self.start(0, 3, port)
        rank1 = self.start(1, 3, port)
        store = connect_store(port, STARTUP_TIMEOUT)
        store.get("mccl/0/claim/1", STARTUP_TIMEOUT)
        store.close()
        time.sleep(0.3)  # rank 1 is now waiting for rank 2 to dial it
        killed = time.monotonic()
        rank0.kill()
        self.expect_failure([rank1], killed, FAST_BOUND,
                            r"rank 1 lost the rendezvous store .*rank 0, which serves it, has exited "
                            r"or was killed")

    def test_world_size_mismatch_reaches_rank0(self):
        port = free_port()
        since = time.monotonic()
        ranks = [self.start(0, 2, port), self.start(1, 3, port)]
        self.expect_failure(ranks, since, FAST_BOUND,
                            r"WORLD_SIZE mismatch: rank 1 \(pid \d+ .*\) has WORLD_SIZE=3, rank 0 "
                            r"\(pid \d+ .*\) has WORLD_SIZE=2")
        self.assertRegex(ranks[0].output("stderr"), r"rank 0 gives up setting up: rank 1 .*failed")

    def test_port_base_on_master_port_is_refused_by_every_rank(self):
        port = free_port()
        since = time.monotonic()
        # MASTER_PORT is rank 1's port here: rank 0 alone did not notice.
        ranks = [self.start(r, 2, port, {"MCCL_PORT_BASE": str(port - 1)}) for r in (0, 1)]
        self.expect_failure(ranks, since, FAST_BOUND,
                            rf"MCCL_PORT_BASE={port - 1} makes rank 1 listen on port {port}, which is "
                            r"MASTER_PORT")

    # 5 ------------------------------------------------------------------

    def test_settings_that_must_agree(self):
        cases = [(2, 1, {"MCCL_CHUNK_BYTES": "4K"}, {"MCCL_CHUNK_BYTES": "1M"},
                  r"MCCL_CHUNK_BYTES=4K on rank 1, MCCL_CHUNK_BYTES=1M on rank 0"),
                 (4, 3, {"MCCL_ALGO": "allreduce=ring"}, {},
                  r"MCCL_ALGO=\"allreduce=ring\" on rank 3, MCCL_ALGO=\(built-in table\) on rank 0")]
        for world, odd, odd_env, env, pattern in cases:
            with self.subTest(setting=pattern):
                try:
                    port = free_port()
                    # The agreeing ranks join first: a rank that starts only
                    # after rank 0 has failed and left finds no store to
                    # read the cause from (it waits out its connect
                    # timeout), which a loaded machine can make happen.
                    ranks = [self.start(r, world, port, env) for r in range(world) if r != odd]
                    store = connect_store(port, STARTUP_TIMEOUT)
                    for r in range(world):
                        if r != odd:
                            store.get(f"mccl/0/claim/{r}", STARTUP_TIMEOUT)
                    store.close()
                    since = time.monotonic()
                    ranks.append(self.start(odd, world, port, odd_env))
                    self.expect_failure(ranks, since, FAST_BOUND, pattern)
                finally:
                    self.close_all()

    # 3 ------------------------------------------------------------------

    def test_second_claim_of_a_rank_is_refused(self):
        port = free_port()
        mode = ("allreduce", "1", "4099")
        job = [self.start(0, 3, port, mode=mode), self.start(1, 3, port, mode=mode)]
        store = connect_store(port, STARTUP_TIMEOUT)
        self.addCleanup(store.close)
        store.get("mccl/0/claim/1", STARTUP_TIMEOUT)
        since = time.monotonic()
        second = self.start(1, 3, port, mode=mode)
        self.expect_failure([second], since, FAST_BOUND,
                            rf"rank 1 is claimed twice: pid {job[1].proc.pid} on .* holds it; this "
                            rf"process \(pid {second.proc.pid} on .*\) is a second RANK=1")
        job.append(self.start(2, 3, port, mode=mode))
        self.expect_job_ok(job)

    def test_rank_of_another_job_is_refused(self):
        port = free_port()
        mode = ("allreduce", "1", "4099")
        job = [self.start(r, 3, port, {"MCCL_JOB_ID": "job-a"}, mode) for r in (0, 1)]
        store = connect_store(port, STARTUP_TIMEOUT)
        self.addCleanup(store.close)
        store.get("mccl/0/claim/1", STARTUP_TIMEOUT)
        since = time.monotonic()
        other = self.start(2, 3, port, {"MCCL_JOB_ID": "job-b"}, mode)
        self.expect_failure([other], since, FAST_BOUND,
                            r"rank 2 \(pid \d+ .*, MCCL_JOB_ID=\"job-b\"\) reached the rendezvous store "
                            r"of another job \(MCCL_JOB_ID=\"job-a\", rank 0 is pid "
                            + str(job[0].proc.pid))
        job.append(self.start(2, 3, port, {"MCCL_JOB_ID": "job-a"}, mode))
        self.expect_job_ok(job)

    # open files -------------------------------------------------------

    def start_limited(self, rank, world, port, nofile, mode):
        r = Rank(rank, world, port, [f"--nofile={nofile}", MCCL_CHECK, *mode],
                 {"MCCL_TRANSPORT": "tcp", "MCCL_CONNECT_TIMEOUT_MS": str(LONG_TIMEOUT_MS)},
                 program="prlimit")
        self.ranks.append(r)
        return r

    def test_open_file_limit_below_the_need_is_refused_by_every_rank(self):
        port = free_port()
        since = time.monotonic()
        ranks = [self.start_limited(r, 12, port, "40:40", ("barrier",)) for r in range(12)]
        self.expect_failure(ranks, since, FAST_BOUND,
                            r"cannot open the files its links need: up to \d+ .* but the open-file "
                            r"limit \(RLIMIT_NOFILE\) is 40 with a hard limit of 40; raise it "
                            r"\(ulimit -n \d+")
        self.assertRegex(ranks[0].output("stderr"), r"rank 0 of 12 .*one store connection per other rank")

    def test_a_short_soft_open_file_limit_is_raised(self):
        port = free_port()
        job = [self.start_limited(r, 12, port, "40:4096", ("ops", "1", "1000")) for r in range(12)]
        for r in job:
            self.assertTrue(r.wait_exit(JOB_TIMEOUT), self.everything())
        for r in job:
            self.assertEqual(r.returncode, 0, self.everything())
            self.assertIsNotNone(r.find_line(r"ops: 0 failure\(s\)"), r.describe())

    def expect_job_ok(self, job):
        for r in job:
            self.assertTrue(r.wait_exit(JOB_TIMEOUT), self.everything())
        for r in job:
            self.assertEqual(r.returncode, 0, self.everything())
            self.assertIsNotNone(r.find_line(r"allreduce: \d+ case\(s\), 0 failure\(s\)"), r.describe())


if __name__ == "__main__":
    unittest.main()
