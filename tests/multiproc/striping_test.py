#!/usr/bin/env python3
"""Several sockets per peer (MCCL_SOCKETS_PER_PEER) across real processes,
over TCP (MCCL_TRANSPORT=tcp: on one host auto would take shared memory).

* With 2 and 3 sockets per peer on 2-4 ranks, every collective is exact
  (mccl_check striped: allreduce, broadcast, the other ops, split), each
  rank reports the sockets it opened, and small allreduces still take the
  inline path (the caller polls the striped connections itself).
* Ranks that disagree on MCCL_SOCKETS_PER_PEER fail at connect time with a
  message naming the setting and both values, instead of hanging.

Ranks are started by the harness of faults_test.py (own process groups,
killed and reaped on every exit path).
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from faults_test import MCCL_CHECK, FaultTest, free_port  # noqa: E402

RUN_TIMEOUT = 240.0
CONNECT_TIMEOUT_MS = 5000


class StripingTest(unittest.TestCase):
    # The rank bookkeeping of the fault tests: start, kill and reap.
    setUp = FaultTest.setUp
    close_all = FaultTest.close_all
    start = FaultTest.start

    @classmethod
    def setUpClass(cls):
        if not os.access(MCCL_CHECK, os.X_OK):
            raise AssertionError(f"mccl_check not found at {MCCL_CHECK}; build it or set MCCL_CHECK")

    def wait_all(self, ranks, timeout):
        deadline = time.monotonic() + timeout
        for r in ranks:
            r.wait_exit(max(0.0, deadline - time.monotonic()))
        return "\n".join(r.describe() for r in ranks)

    def test_collectives_over_several_sockets(self):
        for world, sockets in [(2, 2), (3, 3), (4, 2)]:
            with self.subTest(world=world, sockets=sockets):
                try:
                    ranks = self.start(world, ["striped", "0", "1", "7", "262147", "4194304"],
                                       extra_env={"MCCL_SOCKETS_PER_PEER": str(sockets),
                                                  "MCCL_TRANSPORT": "tcp", "MCCL_LOG_LEVEL": "INFO"})
                    report = self.wait_all(ranks, RUN_TIMEOUT)
                    for r in ranks:
                        self.assertEqual(r.returncode, 0, report)
                        self.assertIsNotNone(
                            r.find_line(rf"rank {r.rank}: connected to {world - 1} peer\(s\) over "
                                        rf"{(world - 1) * sockets} socket\(s\)", "stderr"), report)
                        self.assertIsNotNone(r.find_line(r"inline: [1-9]\d* of"), report)
                finally:
                    self.close_all()

    def test_ranks_that_disagree_fail_naming_the_setting(self):
        port = free_port()
        env = {"MCCL_CONNECT_TIMEOUT_MS": str(CONNECT_TIMEOUT_MS)}
        ranks = (self.start(2, ["barrier"], ranks=[0], port=port,
                            extra_env={**env, "MCCL_SOCKETS_PER_PEER": "1"})
                 + self.start(2, ["barrier"], ranks=[1], port=port,
                              extra_env={**env, "MCCL_SOCKETS_PER_PEER": "2"}))
        report = self.wait_all(ranks, CONNECT_TIMEOUT_MS / 1000 + 30)
        for r in ranks:
            self.assertTrue(r.exited, "a rank hung:\n" + report)
            self.assertNotEqual(r.returncode, 0, report)
        # The dialer (rank 1) is refused with both values named.
        self.assertIsNotNone(ranks[1].find_line(
            r"rank 1 uses MCCL_SOCKETS_PER_PEER=2, rank 0 uses 1: set the same value on every rank",
            "stderr"), report)


if __name__ == "__main__":
    unittest.main()
