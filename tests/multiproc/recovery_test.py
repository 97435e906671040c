#!/usr/bin/env python3
"""Recovery and diagnosis across real processes, one rank per process.

* shrink: SIGKILL one of 3 or 4 ranks in the middle of an allreduce; every
  survivor's op fails naming the lost rank, the survivors shrink the
  communicator without it and run allreduces that are checked element by
  element, in the same processes.
* A frozen rank (SIGSTOP): the other's watchdog error names the op, its
  sequence number, the phase, the peer waited on and the last enqueued and
  completed sequence numbers, and the flight recorder is dumped at ERROR.
* Mismatched collectives (rank 0 allreduce, the others broadcast): every
  rank fails with a desync error.
* Soak: random collectives (op, size, 1-4 in flight) on 3 ranks, every
  element checked, no hang (hard timeout), and resident memory flat between
  half way and the end. SOAK_OPS sets the count (default
  10000, about 3 s here), SOAK_SEED the seed.

Uses the Rank harness of faults_test.py. MCCL_CHECK and MCCL_RECOVERY name
the rank programs (the ctest entry sets both).
"""

import os
import re
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from faults_test import STARTUP_TIMEOUT, MCCL_CHECK, Rank, free_port, stop_ranks  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MCCL_RECOVERY = os.path.abspath(
    os.environ.get("MCCL_RECOVERY")
    or os.path.join(HERE, "..", "..", "build", "tests", "multiproc", "mccl_recovery"))
OP_TIMEOUT_MS = 10000
SOAK_OPS = int(os.environ.get("SOAK_OPS", "10000"))
SOAK_SEED = int(os.environ.get("SOAK_SEED", "20261121"))
# Growth of resident memory allowed from half way through the soak to its
# end. Pools, allocator caches and per-connection receive buffers grow to
# the largest sizes seen, and the rare largest ops of the random mix come
# late (40000 ops grew 1.4-3 MB after the first 10000, 10000 ops 7-15 MB
# after the first 2500); a leak of even a few bytes per op over thousands of
# ops of up to 1 MiB shows far above this.
RSS_SLACK_KIB = 16 * 1024
# tools/dev.sh sets ASAN_OPTIONS for the sanitized build's tests.
UNDER_ASAN = "ASAN_OPTIONS" in os.environ


class RecoveryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for path in (MCCL_CHECK, MCCL_RECOVERY):
            if not os.access(path, os.X_OK):
                raise AssertionError(f"{path} not found; build it or set MCCL_CHECK/MCCL_RECOVERY")

    def setUp(self):
        self.ranks = []
        self.addCleanup(self.close_all)

    def close_all(self):
        stop_ranks(self.ranks)
        self.ranks = []

    def start(self, world, args, env=None, program=MCCL_RECOVERY):
        port = free_port()
        env = dict(env or {})
        self.ranks = [Rank(r, world, port, args, env, program=program) for r in range(world)]
        return self.ranks

    def wait_all(self, ranks, timeout):
        deadline = time.monotonic() + timeout
        for r in ranks:
            self.assertTrue(r.wait_exit(max(0.0, deadline - time.monotonic())),
                            f"rank {r.rank} still running after {timeout:.0f} s:\n{r.describe()}")

    # -- shrink -----------------------------------------------------------

    def test_shrink_after_sigkill(self):
        for world, victim in [(3, 1), (4, 2)]:
            with self.subTest(world=world, victim=victim):
                try:
                    self.check_shrink(world, victim)
                finally:
                    self.close_all()

    def check_shrink(self, world, victim):
        ranks = self.start(world, ["shrink", "1048576", str(victim)],
                           {"MCCL_TIMEOUT_MS": str(OP_TIMEOUT_MS)})
        for r in ranks:
            self.assertIsNotNone(r.wait_for_line(r"stress started", STARTUP_TIMEOUT), r.describe())
        time.sleep(0.3)
        ranks[victim].kill()
        survivors = [r for r in ranks if r.rank != victim]
        self.wait_all(survivors, OP_TIMEOUT_MS / 1000 + 30)
        for r in survivors:
            failed = r.find_line(r"op failed:")
            self.assertIsNotNone(failed, r.describe())
            self.assertRegex(failed[1], rf"\brank {victim}\b", r.describe())
            shrunk = r.find_line(r"shrunk to rank (\d+) of (\d+), (\d+) bad")
            self.assertIsNotNone(shrunk, r.describe())
            new_rank, new_world, bad = map(int, re.search(
                r"shrunk to rank (\d+) of (\d+), (\d+) bad", shrunk[1]).groups())
            self.assertEqual((new_rank, new_world, bad),
                             (r.rank - (r.rank > victim), world - 1, 0), r.describe())
            self.assertEqual(r.returncode, 0, r.describe())
            print(f"  world {world}, victim {victim}: {shrunk[1]}", file=sys.stderr, flush=True)

    # -- watchdog and flight recorder ---------------------------------------

    def test_frozen_rank_names_op_peer_and_progress(self):
        # 64K floats take the actor path; 16 run inline on the caller's thread.
        for count in (65536, 16):
            with self.subTest(count=count):
                try:
                    self.check_frozen(count)
                finally:
                    self.close_all()

    def check_frozen(self, count):
        timeout_ms = 2000
        rank0, rank1 = self.start(2, ["stress", str(count)], {"MCCL_TIMEOUT_MS": str(timeout_ms)},
                                  program=MCCL_CHECK)
        for r in (rank0, rank1):
            self.assertIsNotNone(r.wait_for_line(r"stress started", STARTUP_TIMEOUT), r.describe())
        time.sleep(0.3)
        os.killpg(rank1.proc.pid, signal.SIGSTOP)
        self.assertTrue(rank0.wait_exit(timeout_ms / 1000 + 10), rank0.describe())
        self.assertEqual(rank0.returncode, 3, rank0.describe())
        line = rank0.find_line(r"op failed after")[1]
        print(f"  {line}", file=sys.stderr, flush=True)
        for wanted in [r"allreduce seq \d+", r"failed at \S", r"waiting on rank\(?s?\)? 1",
                       rf"timed out after MCCL_TIMEOUT_MS={timeout_ms}",
                       r"last enqueued seq \d+, last completed seq \d+"]:
            self.assertRegex(line, wanted)
        seq = int(re.search(r"allreduce seq (\d+)", line).group(1))
        err = rank0.output("stderr")
        self.assertIn("flight recorder of rank 0", err)
        # The failed op is in the dump, after the ones that completed.
        self.assertRegex(err, rf"allreduce seq {seq}, \d+ B, \S+ \(driven by the (caller|op thread|actor)\): (failed|aborted) after")
        self.assertRegex(err, rf"allreduce seq {seq - 1}, \d+ B, \S+ \(driven by the (caller|op thread|actor)\): done after")

    # -- desync -------------------------------------------------------------

    def test_mismatched_collectives_fail_every_rank(self):
        for world in (2, 3):
            with self.subTest(world=world):
                try:
                    ranks = self.start(world, ["desync"], {"MCCL_TIMEOUT_MS": str(OP_TIMEOUT_MS)})
                    self.wait_all(ranks, OP_TIMEOUT_MS / 1000 + 20)
                    for r in ranks:
                        self.assertEqual(r.returncode, 0, r.describe())
                        self.assertIsNotNone(
                            r.find_line(r"desync error: .*ranks issued different collectives"),
                            r.describe())
                finally:
                    self.close_all()

    # -- soak -----------------------------------------------------------------

    def test_soak_random_ops(self):
        world = 3
        ranks = self.start(world, ["soak", str(SOAK_OPS), str(SOAK_SEED)],
                           {"MCCL_TIMEOUT_MS": "60000"})
        # Hard bound: generous for CI-sized runs, scaled for the full count.
        self.wait_all(ranks, 120 + SOAK_OPS * 0.05)
        pattern = r"soak (\d+) ops, (\d+) elements, (\d+) wrong, rss after half (\d+) KiB, at the end (\d+) KiB"
        for r in ranks:
            self.assertEqual(r.returncode, 0, r.describe())
            found = r.find_line(pattern)
            self.assertIsNotNone(found, r.describe())
            print(f"  {found[1]}", file=sys.stderr, flush=True)
            ops, _, wrong, half, end = map(int, re.search(pattern, found[1]).groups())
            self.assertEqual((ops, wrong), (SOAK_OPS, 0), r.describe())
            if UNDER_ASAN:
                print("  RSS not compared: under AddressSanitizer, whose quarantine holds freed "
                      "memory (LeakSanitizer checks for leaks at exit instead)",
                      file=sys.stderr, flush=True)
                continue
            self.assertLessEqual(end - half, RSS_SLACK_KIB,
                                 f"rank {r.rank}: RSS grew from {half} to {end} KiB")


if __name__ == "__main__":
    unittest.main()
