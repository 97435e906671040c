#!/usr/bin/env python3
"""Silent and garbage connections beside a job, across real processes.

* Setup: ten connections that say nothing (and one that stops after half a
  header) held open to rank 0's mesh port, and two that send bytes that are
  not mccl, while a 3-rank job starts. Rank 0 reads them side by side with
  its real peers: the job connects within SETUP_BOUND of its last rank's
  start (not 5 s per stray), every result is checked, and rank 0 logs the
  strays.
* Reconnect: with MCCL_TRANSPORT_CRC=1 MCCL_RECONNECT_MS=3000 over TCP, an
  idle connection held open to rank 0's reconnect listener neither stops a
  link that breaks meanwhile (a fault scenario closes it) from being
  resumed (fresh strays keep arriving while it is), nor keeps either rank
  from exiting within EXIT_BOUND of its work.

Set MCCL_CHECK to the mccl_check binary (the ctest entry does).
"""

import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from faults_test import MCCL_CHECK, STARTUP_TIMEOUT, Rank, free_port, stop_ranks  # noqa: E402
from security_test import HELLO, frame, connect_store  # noqa: E402

# From the moment the last rank starts until every rank has its mesh: far
# above what it takes (well under a second) and below one stray's 5 s.
SETUP_BOUND = 4.0
# From a rank's last line of work to its exit.
EXIT_BOUND = 2.0
JOB_TIMEOUT = 60.0


def dial(endpoint, timeout=10.0):
    host, port = endpoint.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


class StraysTest(unittest.TestCase):
    def setUp(self):
        if not os.access(MCCL_CHECK, os.X_OK):
            raise AssertionError(f"mccl_check not found at {MCCL_CHECK}; build it or set MCCL_CHECK")
        self.ranks = []
        self.strays = []
        self.addCleanup(self.close_all)

    def close_all(self):
        for s in self.strays:
            s.close()
        self.strays = []
        stop_ranks(self.ranks)
        self.ranks = []

    def test_strays_do_not_delay_setup(self):
        port = free_port()
        env = {"MCCL_LOG_LEVEL": "INFO", "MCCL_TRANSPORT": "tcp"}
        mode = ["allreduce", "1", "4099"]
        self.ranks = [Rank(0, 3, port, mode, env)]
        store = connect_store(port, STARTUP_TIMEOUT)
        self.addCleanup(store.close)
        ep0 = store.get("mccl/0/ep/0", STARTUP_TIMEOUT)
        for _ in range(10):
            self.strays.append(dial(ep0))
        half = dial(ep0)
        half.sendall(frame(HELLO, b"\0" * 20)[:30])
        self.strays.append(half)
        for _ in range(2):
            junk = dial(ep0)
            junk.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"\0" * 40)
            self.strays.append(junk)
        self.assertIsNotNone(self.ranks[0].wait_for_line(r"refused a connection from .*malformed frame",
                                                         10.0, "stderr"), self.ranks[0].describe())

        started = time.monotonic()
        self.ranks += [Rank(r, 3, port, mode, env) for r in (1, 2)]
        for r in self.ranks:
            self.assertTrue(r.wait_exit(JOB_TIMEOUT), r.describe())
        for r in self.ranks:
            self.assertEqual(r.returncode, 0, r.describe())
            self.assertIsNotNone(r.find_line(r"allreduce: \d+ case\(s\), 0 failure\(s\)"), r.describe())
        connected = self.ranks[0].find_line(r"connected to 2 peer\(s\)", "stderr")
        self.assertIsNotNone(connected, self.ranks[0].describe())
        took = connected[0] - started
        print(f"  rank 0 connected {took:.2f} s after ranks 1 and 2 started, beside 13 strays",
              file=sys.stderr, flush=True)
        self.assertLess(took, SETUP_BOUND, self.ranks[0].describe())
        summary = self.ranks[0].find_line(
            r"refused (\d+) stray connection\(s\) to .* and closes (\d+) that have sent no hello yet",
            "stderr")
        self.assertIsNotNone(summary, self.ranks[0].describe())
        self.assertRegex(summary[1], r"refused 2 stray .* closes 11 that")

    def test_idle_stray_neither_blocks_a_resume_nor_the_exit(self):
        tmp = tempfile.mkdtemp(prefix="mccl-strays-")
        self.addCleanup(shutil.rmtree, tmp, True)
        scenario = os.path.join(tmp, "close.json")
        with open(scenario, "w") as f:
            # Rank 1 sleeps 1.5 s before op 1 (late-rank); rank 0's first
            # frame of that op closes the link, which rank 1 (who dialled it
            # at first) dials again and rank 0's resumer accepts.
            json.dump({"seed": 1, "faults": [{"kind": "close", "link": "0->1", "seq": 1}]}, f)
        port = free_port()
        env = {"MCCL_LOG_LEVEL": "INFO", "MCCL_TRANSPORT": "tcp", "MCCL_TRANSPORT_CRC": "1",
               "MCCL_RECONNECT_MS": "3000", "MCCL_TIMEOUT_MS": "10000", "MCCL_FAULTS": scenario,
               "MCCL_FAULTS_REPORT": os.path.join(tmp, "report")}
        self.ranks = [Rank(r, 2, port, ["late-rank", "1500"], env) for r in (0, 1)]
        store = connect_store(port, STARTUP_TIMEOUT)
        self.addCleanup(store.close)
        ep0 = store.get("mccl/0/ep/0", STARTUP_TIMEOUT)
        ep1 = store.get("mccl/0/ep/1", STARTUP_TIMEOUT)
        for r in self.ranks:
            self.assertIsNotNone(r.wait_for_line(r"connected to 1 peer\(s\)", STARTUP_TIMEOUT, "stderr"),
                                 r.describe())
        # Now both listeners belong to the resumers: idle strays on each,
        # and a fresh one on rank 0's every 100 ms until the job ends, so
        # that some are always waiting when the resume arrives.
        self.strays += [dial(ep0), dial(ep0), dial(ep1)]
        stop = threading.Event()
        fresh = []

        def feed():
            while not stop.wait(0.1) and len(fresh) < 200:
                try:
                    fresh.append(dial(ep0, timeout=1.0))
                except OSError:
                    return  # rank 0 is gone
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()

        def stop_feeding():
            stop.set()
            feeder.join(5.0)
            for s in fresh:
                s.close()
        self.addCleanup(stop_feeding)

        for r in self.ranks:
            self.assertTrue(r.wait_exit(JOB_TIMEOUT), r.describe())
        everything = "\n".join(r.describe() for r in self.ranks)
        for r in self.ranks:
            self.assertEqual(r.returncode, 0, everything)
            done = r.find_line(r"late-rank: 0 failure\(s\)")
            self.assertIsNotNone(done, everything)
            late = r.exit_time - done[0]
            print(f"  rank {r.rank} exited {late:.2f} s after its work, idle strays held open",
                  file=sys.stderr, flush=True)
            self.assertLess(late, EXIT_BOUND, r.describe())
        resumed = self.ranks[0].find_line(r"rank 0 resumed its link to rank 1", "stderr")
        self.assertIsNotNone(resumed, self.ranks[0].describe())
        self.assertIsNotNone(self.ranks[0].find_line(
            r"refused a connection from .*sent no complete hello within 500 ms", "stderr"),
            self.ranks[0].describe())


if __name__ == "__main__":
    unittest.main()
