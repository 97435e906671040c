#!/usr/bin/env python3
"""A network partition between two ranks, made with network namespaces.

The test creates two namespaces named after its pid, joins them with a veth
pair (10.233.0.1 and 10.233.0.2, addresses that exist only inside them),
starts rank 0 in one and rank 1 in the other, and cuts the link with an
iptables DROP rule inside rank 1's namespace:

* a partition that lasts: both ranks fail within MCCL_TIMEOUT_MS + 5 s,
  naming the op and the peer, and exit (no hang);
* a partition that heals well inside the op deadline: TCP retransmits what
  was dropped and the ranks' random-op soak completes with every element
  checked;
* a cut that RESETs the connection (iptables REJECT with tcp-reset) with
  MCCL_TRANSPORT_CRC=1 and MCCL_RECONNECT_MS: healed inside the window, the
  link is re-established and the soak completes with every element right;
  lasting, both ranks fail once the window ends, naming the peer.

Everything it creates is removed in cleanup, also when a step fails
(deleting a namespace removes its veth end and its iptables rules). Needs
root, `ip` (iproute2) and `iptables`; when not root it prints why it skips.
"""

import os
import re
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from faults_test import STARTUP_TIMEOUT, MCCL_CHECK, Rank, stop_ranks  # noqa: E402
from recovery_test import MCCL_RECOVERY  # noqa: E402

PID = os.getpid()
NS = (f"mccl{PID}a", f"mccl{PID}b")
VETH = (f"mv{PID}a", f"mv{PID}b")
ADDR = ("10.233.0.1", "10.233.0.2")
PORT = 29500  # inside a namespace of our own: nothing else can hold it


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True, timeout=30)


def skip_reason():
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    return None


class PartitionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = skip_reason()
        if why:
            print(f"partition_test: SKIPPED: {why}", file=sys.stderr, flush=True)
            raise unittest.SkipTest(why)
        for tool in ("ip", "iptables"):
            if not shutil.which(tool):
                raise AssertionError(f"{tool} not found (tools/dev.sh installs iproute2 and iptables)")

    def setUp(self):
        self.ranks = []
        self.addCleanup(self.remove_network)
        self.addCleanup(self.close_ranks)
        sh("ip", "netns", "add", NS[0])
        sh("ip", "netns", "add", NS[1])
        sh("ip", "link", "add", VETH[0], "type", "veth", "peer", "name", VETH[1])
        for ns, veth, addr in zip(NS, VETH, ADDR):
            sh("ip", "link", "set", veth, "netns", ns)
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", veth)
            sh("ip", "-n", ns, "link", "set", veth, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def close_ranks(self):
        stop_ranks(self.ranks)

    def remove_network(self):
        for ns in NS:
            sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", VETH[0], check=False)  # only if it never moved

    def start(self, program, args, env):
        env = dict(env, MASTER_ADDR=ADDR[0])
        self.ranks = [Rank(r, 2, PORT, ["netns", "exec", NS[r], program, *args], env,
                           program=shutil.which("ip")) for r in range(2)]
        return self.ranks

    def partition(self, on):
        sh("ip", "netns", "exec", NS[1], "iptables", "-A" if on else "-D", "INPUT", "-i",
           VETH[1], "-j", "DROP")

    def reset_cut(self, on):
        # Every TCP segment rank 1 receives is answered with a RST (except
        # RSTs themselves, so rank 0's answers reset rank 1's end too): both
        # ends of the connection see it reset, and redials fail until healed.
        sh("ip", "netns", "exec", NS[1], "iptables", "-A" if on else "-D", "INPUT", "-i", VETH[1],
           "-p", "tcp", "!", "--tcp-flags", "RST", "RST", "-j", "REJECT", "--reject-with", "tcp-reset")

    def wait_for_soak(self, ranks):
        """Until every rank ran its first ops, then a moment more: the cut
        must come while the soak runs (on a quiet machine 10^5 ops take a few
        seconds, so a fixed sleep could outlast them)."""
        for r in ranks:
            self.assertIsNotNone(r.wait_for_line(r"soak started", STARTUP_TIMEOUT), r.describe())
        time.sleep(0.2)

    RESUMABLE = {"MCCL_TRANSPORT_CRC": "1", "MCCL_HEARTBEAT_MS": "200", "MCCL_TIMEOUT_MS": "15000"}

    def test_reset_cut_healed_inside_the_reconnect_window_completes(self):
        ops = 100000
        ranks = self.start(MCCL_RECOVERY, ["soak", str(ops), "7"],
                           dict(self.RESUMABLE, MCCL_RECONNECT_MS="5000"))
        self.wait_for_soak(ranks)
        self.assertFalse(any(r.exited for r in ranks), "the soak ended before the cut:\n"
                         + "\n".join(r.describe() for r in ranks))
        self.reset_cut(True)
        time.sleep(1.0)
        self.reset_cut(False)
        for r in ranks:
            self.assertTrue(r.wait_exit(120), r.describe())
        resumed = 0
        for r in ranks:
            self.assertEqual(r.returncode, 0, r.describe())
            found = r.find_line(r"soak (\d+) ops, \d+ elements, (\d+) wrong")
            self.assertIsNotNone(found, r.describe())
            self.assertEqual(re.search(r"soak (\d+) ops, \d+ elements, (\d+) wrong", found[1]).groups(),
                             (str(ops), "0"))
            line = re.search(r"resumed after \d+ ms.*", r.output("stderr"))
            resumed += line is not None
            print(f"  rank {r.rank}: {found[1]}; {line[0] if line else '(not resumed)'}",
                  file=sys.stderr, flush=True)
        self.assertGreater(resumed, 0, "the cut reset no connection:\n"
                           + "\n".join(r.describe() for r in ranks))

    def expect_failure_after_cut(self, ranks, bound):
        """The network was just cut: every rank must exit with status 3 (an
        op failed) within `bound` seconds. Returns (rank, its "op failed"
        line) for the caller's checks of what the error names."""
        cut = time.monotonic()
        for r in ranks:
            self.assertTrue(r.wait_exit(max(0.0, cut + bound + 5 - time.monotonic())),
                            f"rank {r.rank} still running {bound + 5:.0f} s into the cut:\n"
                            + r.describe())
        failures = []
        for r in ranks:
            took = r.exit_time - cut
            line = r.find_line(r"op failed after")
            print(f"  rank {r.rank} exited {r.returncode} {took:.2f} s after the cut: "
                  f"{line[1] if line else '(no error line)'}", file=sys.stderr, flush=True)
            self.assertEqual(r.returncode, 3, r.describe())
            self.assertLessEqual(took, bound, r.describe())
            self.assertIsNotNone(line, r.describe())
            failures.append((r, line))
        return failures

    def test_lasting_reset_cut_fails_after_the_reconnect_window_naming_the_peer(self):
        window_ms = 1500
        ranks = self.start(MCCL_CHECK, ["stress", "65536"],
                           dict(self.RESUMABLE, MCCL_RECONNECT_MS=str(window_ms)))
        for r in ranks:
            self.assertIsNotNone(r.wait_for_line(r"stress started", STARTUP_TIMEOUT), r.describe())
        time.sleep(0.3)
        self.reset_cut(True)
        for r, _ in self.expect_failure_after_cut(ranks, window_ms / 1000 + 5):
            self.assertRegex(r.output("stderr"), rf"lost rank {1 - r.rank}\b.*not re-established within "
                             rf"MCCL_RECONNECT_MS={window_ms}", r.describe())

    def test_lasting_partition_fails_within_the_deadline(self):
        timeout_ms = 3000
        ranks = self.start(MCCL_CHECK, ["stress", "65536"], {"MCCL_TIMEOUT_MS": str(timeout_ms)})
        for r in ranks:
            self.assertIsNotNone(r.wait_for_line(r"stress started", STARTUP_TIMEOUT), r.describe())
        time.sleep(0.3)
        self.partition(True)
        for r, line in self.expect_failure_after_cut(ranks, timeout_ms / 1000 + 5):
            self.assertRegex(line[1], rf"allreduce seq \d+ .*rank {1 - r.rank}\b", r.describe())

    def test_partition_healed_inside_the_deadline_completes(self):
        ops = 100000
        # Heartbeats off: after the cut heals, TCP's retransmission backoff
        # can keep a link silent for seconds more, which the heartbeat rule
        # (MCCL_HEARTBEAT_MS x MCCL_HEARTBEAT_MISSES, 5 s) may call a dead
        # peer on a loaded machine; this test is about TCP recovering.
        ranks = self.start(MCCL_RECOVERY, ["soak", str(ops), "7"],
                           {"MCCL_TIMEOUT_MS": "15000", "MCCL_HEARTBEAT_MISSES": "0"})
        self.wait_for_soak(ranks)
        self.assertFalse(any(r.exited for r in ranks), "the soak ended before the partition:\n"
                         + "\n".join(r.describe() for r in ranks))
        self.partition(True)
        time.sleep(1.5)
        self.partition(False)
        self.assertFalse(any(r.exited for r in ranks), "a rank exited during the partition:\n"
                         + "\n".join(r.describe() for r in ranks))
        for r in ranks:
            self.assertTrue(r.wait_exit(120), r.describe())
        everyone = "\n".join(r.describe() for r in ranks)
        for r in ranks:
            self.assertEqual(r.returncode, 0, f"rank {r.rank} failed:\n{everyone}")
            found = r.find_line(r"soak (\d+) ops, \d+ elements, (\d+) wrong")
            self.assertIsNotNone(found, r.describe())
            print(f"  {found[1]}", file=sys.stderr, flush=True)
            self.assertEqual(re.search(r"soak (\d+) ops, \d+ elements, (\d+) wrong", found[1]).groups(),
                             (str(ops), "0"))


if __name__ == "__main__":
    unittest.main()
