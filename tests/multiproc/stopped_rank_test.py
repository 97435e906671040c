#!/usr/bin/env python3
"""A rank that was stopped (SIGSTOP) and then continued (SIGCONT) hears the
same true cause over shared memory and over TCP: it was declared dead after
its peers heard nothing from it for N ms. (Over shared memory it used to be
told only that "the peer dropped a payload it had offered for single copy",
or that the peer closed the connection.)

For each transport (shm with single copy forced on, so the survivors hold
open splices toward the stopped rank when they abort; tcp) and each world
(2 and 3 ranks, mccl_check stress over 1 MiB allreduces):

* rank 1 is stopped mid-stress; every other rank fails within
  DEAD_AFTER + DETECT_MARGIN naming rank 1 as declared dead after the
  heartbeat limit;
* the survivors stay alive (they linger 4 s after their failure), rank 1
  is continued, and within WAKE_BOUND its op fails with "rank R aborted
  the communicator: lost rank 1: rank 1 ... sent nothing for N ms
  (MCCL_HEARTBEAT_MS=200 x MCCL_HEARTBEAT_MISSES=5): declared dead" (or,
  issued after it read that ABORT, is refused with "the communicator is
  revoked by rank R: lost rank 1: ..." and the same cause), N at least the
  limit, and never "dropped a payload" nor "closed the connection";
* every rank exits; nothing is left in /dev/shm.

Ranks run in sessions of their own and are killed and reaped on every exit
path (SIGKILL also ends a stopped rank); every wait is bounded.
"""

import os
import re
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from faults_test import MCCL_CHECK, STARTUP_TIMEOUT, Rank, free_port, stop_ranks  # noqa: E402
from shm_test import dev_shm  # noqa: E402

HEARTBEAT = {"MCCL_HEARTBEAT_MS": "200", "MCCL_HEARTBEAT_MISSES": "5"}
DEAD_AFTER = 0.2 * 5
# Detection takes the limit plus a heartbeat check; a loaded CI machine
# gets room, far below MCCL_TIMEOUT_MS (60 s), which must not be what fires.
DETECT_MARGIN = 5.0
WAKE_BOUND = 10.0
LINGER_MS = 4000
COUNT = str(1 << 18)  # 1 MiB of float32: above the 64 KiB single-copy size
EXIT_BOUND = 20.0

DECLARED_DEAD = (r"lost rank 1: rank 1 (at \S+|over shared memory) sent nothing for (\d+) ms "
                 r"\(MCCL_HEARTBEAT_MS=200 x MCCL_HEARTBEAT_MISSES=5\): declared dead")


class StoppedRankTest(unittest.TestCase):
    def setUp(self):
        if not os.access(MCCL_CHECK, os.X_OK):
            raise AssertionError(f"mccl_check not found at {MCCL_CHECK}; build it or set MCCL_CHECK")
        self.ranks = []
        self.addCleanup(self.close_all)
        self.shm_before = dev_shm()

    def close_all(self):
        stop_ranks(self.ranks)
        self.ranks = []

    def everything(self):
        return "\n".join(r.describe() for r in self.ranks)

    def run_case(self, transport, world):
        env = dict(HEARTBEAT, MCCL_TRANSPORT=transport, MCCL_TIMEOUT_MS="60000", MCCL_LOG_LEVEL="INFO")
        if transport == "shm":
            env["MCCL_SHM_SINGLE_COPY_BYTES"] = "64K"
        port = free_port()
        self.ranks = [Rank(r, world, port, ["stress", COUNT, str(LINGER_MS)], env) for r in range(world)]
        deadline = time.monotonic() + STARTUP_TIMEOUT
        for r in self.ranks:
            self.assertIsNotNone(r.wait_for_line(r"stress started", max(0.0, deadline - time.monotonic())),
                                 self.everything())
        if transport == "shm":
            self.assertIsNotNone(self.ranks[0].find_line(r"rank 1 over shared memory .*single copy from",
                                                         "stderr"), self.ranks[0].describe())
        time.sleep(0.3)  # a few ops in, so the stop lands inside one
        stopped = self.ranks[1]
        os.killpg(stopped.proc.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        survivors = [r for r in self.ranks if r is not stopped]
        for r in survivors:
            found = r.wait_for_line(r"op failed after",
                                    max(0.0, stopped_at + DEAD_AFTER + DETECT_MARGIN - time.monotonic()))
            self.assertIsNotNone(found, f"rank {r.rank} did not give up on stopped rank 1:\n"
                                 + self.everything())
            self.assertRegex(found[1], DECLARED_DEAD, r.describe())
            print(f"  {transport}, {world} ranks: rank {r.rank} failed {found[0] - stopped_at:.2f} s "
                  "after rank 1 was stopped", file=sys.stderr, flush=True)
        continued_at = time.monotonic()
        os.killpg(stopped.proc.pid, signal.SIGCONT)
        found = stopped.wait_for_line(r"op failed after", WAKE_BOUND)
        self.assertIsNotNone(found, "rank 1 did not fail after it was continued:\n" + self.everything())
        line = found[1]
        print(f"  {transport}, {world} ranks: continued rank 1 failed {found[0] - continued_at:.2f} s "
              f"later: {line}", file=sys.stderr, flush=True)
        # Its op in flight fails with the peer's ABORT; an op it issues after
        # reading that ABORT is refused, the communicator being revoked by
        # the lost member (the ABORT revokes it), naming the same cause.
        self.assertRegex(line, r"(rank [02] aborted the communicator|the communicator is revoked by rank [02]): "
                         + DECLARED_DEAD, stopped.describe())
        silent_ms = int(re.search(DECLARED_DEAD, line).group(2))
        self.assertGreaterEqual(silent_ms, DEAD_AFTER * 1000, line)
        self.assertNotIn("dropped a payload", line)
        self.assertNotIn("closed the connection", line)
        for r in self.ranks:
            self.assertTrue(r.wait_exit(EXIT_BOUND), f"rank {r.rank} still running:\n" + self.everything())
            self.assertEqual(r.returncode, 3, r.describe())  # stress: an op failed
        left = dev_shm() - self.shm_before
        self.assertEqual(left, set(), f"files left in /dev/shm: {sorted(left)}")

    def test_shm_two_ranks(self):
        self.run_case("shm", 2)

    def test_shm_three_ranks(self):
        self.run_case("shm", 3)

    def test_tcp_two_ranks(self):
        self.run_case("tcp", 2)

    def test_tcp_three_ranks(self):
        self.run_case("tcp", 3)


if __name__ == "__main__":
    unittest.main()
