#!/usr/bin/env python3
"""The shared-memory transport across real processes of this host, with the
mccl_check rank program:

* MCCL_TRANSPORT=shm: every pair of 3 and of 4 ranks is linked over
  shared memory (logged at INFO per peer, with single copy of large
  payloads at 4 ranks) with a host board for small ops, the collectives
  are exact (65537 floats staged through the board in two pieces,
  board_rs), and no file is left in /dev/shm;
* a rank SIGKILLed mid-allreduce (over the links, copied once at 4 ranks,
  on the board, or staged through it in pieces by board_rs) is named by
  every survivor within a second, and still nothing is left in /dev/shm;
* ranks that disagree on MCCL_TRANSPORT all fail, naming both values.

Ranks are started by the harness of faults_test.py (each in its own session,
killed and reaped on every exit path); every wait is bounded.
"""

import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from faults_test import STARTUP_TIMEOUT, RankTest, free_port  # noqa: E402

RUN_BOUND = 120.0
# The promise: a crashed peer is detected and named within 1 s.
CRASH_NAMED_WITHIN = 1.0


def dev_shm():
    """The names in /dev/shm, less CPython multiprocessing's named semaphores
    (sem.mp-*): the Python tests that ctest runs beside this one make them,
    and mccl makes no named semaphore (nor any other name there)."""
    try:
        return {n for n in os.listdir("/dev/shm") if not n.startswith("sem.mp-")}
    except FileNotFoundError:
        return set()


class ShmTest(RankTest):
    def setUp(self):
        super().setUp()
        self.shm_before = dev_shm()

    def start_with(self, world, args, env=None, per_rank_env=None):
        """start() with INFO logs and a 20 s op deadline; per_rank_env: {rank: {...}}."""
        port = free_port()
        started = []
        for r in range(world):
            extra = {"MCCL_TIMEOUT_MS": "20000", "MCCL_LOG_LEVEL": "INFO"}
            extra.update(env or {})
            extra.update((per_rank_env or {}).get(r, {}))
            started += self.start(world, args, ranks=[r], port=port, extra_env=extra)
        return started

    def finish(self, ranks, bound=RUN_BOUND):
        deadline = time.monotonic() + bound
        for r in ranks:
            r.wait_exit(max(0.0, deadline - time.monotonic()))
        for r in ranks:
            self.assertIsNotNone(r.exit_time, f"rank {r.rank} still running after {bound:.0f} s:\n"
                                 + "\n".join(x.describe() for x in ranks))

    def assert_nothing_left_in_dev_shm(self):
        left = dev_shm() - self.shm_before
        self.assertEqual(left, set(), f"files left in /dev/shm: {sorted(left)}")

    def test_every_pair_over_shared_memory_exact_and_nothing_left(self):
        # 4 ranks: large payloads are copied once from the sender's memory
        # (MCCL_SHM_SINGLE_COPY_BYTES=auto); with 3 they pass the rings.
        for world, single in ((4, "single copy from 64 KiB"), (3, "no single copy")):
            with self.subTest(world=world):
                ranks = self.start_with(world, ["allreduce", "0", "1", "7", "65537", "262147", "4194304"],
                                        {"MCCL_TRANSPORT": "shm"})
                self.finish(ranks)
                for r in ranks:
                    self.assertEqual(r.returncode, 0, r.describe())
                    err = r.output("stderr")
                    for peer in range(world):
                        if peer != r.rank:
                            self.assertRegex(err, rf"rank {r.rank}: rank {peer} over shared memory \(2 MiB "
                                             rf"rings, {single},", r.describe())
                    self.assertIn(f"{world - 1} of the peers over shared memory", err, r.describe())
                    self.assertIn(f"rank {r.rank}: host board for {world} ranks", err, r.describe())
                self.close_all()
                self.assert_nothing_left_in_dev_shm()

    def test_crashed_rank_is_named_within_a_second(self):
        # 1M floats go over the links, 16 over the host board, 32K (128 KiB)
        # and 200000 (four 256 KiB pieces) staged through it (board_rs).
        for world, victim, count in [(2, 1, 1048576), (4, 2, 1048576), (3, 1, 16), (3, 1, 32768),
                                     (4, 2, 200000)]:
            with self.subTest(world=world, victim=victim, count=count):
                try:
                    self.check_crash(world, victim, count)
                finally:
                    self.close_all()
                self.assert_nothing_left_in_dev_shm()

    def check_crash(self, world, victim, count):
        ranks = self.start_with(world, ["stress", str(count)])
        for r in ranks:
            self.assertIsNotNone(r.wait_for_line(r"stress started", STARTUP_TIMEOUT),
                                 "a rank did not start:\n" + "\n".join(x.describe() for x in ranks))
        time.sleep(0.3)
        killed_at = time.monotonic()
        ranks[victim].kill()
        survivors = [r for r in ranks if r.rank != victim]
        for r in survivors:
            r.wait_exit(30.0)
        for r in survivors:
            failure = r.find_line(r"op failed after")
            self.assertIsNotNone(failure, r.describe())
            took = failure[0] - killed_at
            print(f"  world {world}, count {count}: rank {r.rank} named the crash of rank {victim} "
                  f"after {took * 1000:.0f} ms",
                  file=sys.stderr)
            cause = re.split(r"op failed after \d+ ms:", failure[1], maxsplit=1)[-1]
            self.assertRegex(cause, rf"\blost rank {victim}\b", r.describe())
            self.assertLessEqual(took, CRASH_NAMED_WITHIN, r.describe())

    def test_ranks_disagreeing_on_the_transport_all_fail_naming_both(self):
        ranks = self.start_with(2, ["allreduce", "1"], per_rank_env={0: {"MCCL_TRANSPORT": "auto"},
                                                                1: {"MCCL_TRANSPORT": "tcp"}})
        self.finish(ranks, bound=60.0)
        for r in ranks:
            self.assertNotEqual(r.returncode, 0, r.describe())
            self.assertRegex(r.output("stderr"), r"MCCL_TRANSPORT differs between ranks: rank \d has "
                                                 r"(auto|tcp), rank \d has (auto|tcp)", r.describe())


if __name__ == "__main__":
    unittest.main(verbosity=2)
