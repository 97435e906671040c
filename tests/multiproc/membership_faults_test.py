#!/usr/bin/env python3
"""A rank lost in the middle of a membership change, across real processes
over loopback: a fault scenario (MCCL_FAULTS) crashes it inside the change,
once it is connected to the new communicator and before it confirms it
(docs/fault-injection.md, "Faults during a membership change"). In every
case the change fails on every live rank within a bound, naming what was
lost; the live ranks try again without it; and every live process ends on
one communicator whose membership (size and which processes, by the id
each was launched with) it reports identically, checked by an exact
allreduce. With the rank program mccl_membership (MCCL_MEMBERSHIP):

* shrink: 5 ranks; rank 4 crashes at op seq 3, the survivors shrink
  without it and another rank (2, then 0, which serves the rendezvous
  store) crashes inside that shrink; the survivors shrink without both;
* grow: 4 ranks grow by one newcomer; (a) the newcomer crashes inside the
  grow: the old ranks keep their communicator; (b) old rank 1 crashes
  inside it: the others shrink without it and grow again, the newcomer
  joining with the second handle;
* reconfigure: 4 members; member 2 crashes inside the reconfigure: no
  member commits (each stays on its old communicator) and the others
  reconfigure again, with a new uuid, without it.

Every rank runs in its own session and is killed and reaped on every exit
path (faults_test.Rank); every wait is bounded; nothing may be left in
/dev/shm.
"""

import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from faults_test import Rank, free_port, stop_ranks  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MCCL_MEMBERSHIP = os.path.abspath(
    os.environ.get("MCCL_MEMBERSHIP")
    or os.path.join(HERE, "..", "..", "build", "tests", "multiproc", "mccl_membership"))
# A silent peer is dead after 200 ms x 5; setup waits end after 10 s.
SETTINGS = {"MCCL_HEARTBEAT_MS": "200", "MCCL_HEARTBEAT_MISSES": "5", "MCCL_TIMEOUT_MS": "5000",
            "MCCL_CONNECT_TIMEOUT_MS": "10000"}
# The failed change must end on every live rank within this (a lost peer is
# seen at once when its connections close; the liveness verdict, 1 s, is
# the slowest path), far below MCCL_CONNECT_TIMEOUT_MS and the reconfigure
# timeout (20 s) that would otherwise end it.
CHANGE_FAILS_WITHIN_MS = 4000
# A whole case ends well within this on a loaded 2-core machine; a rank
# still running then is a hang.
RUN_BOUND = 60.0
MEMBERSHIP = re.compile(r"membership size=(\d+) ids=([\d,]+) bad=(\d+)")


def dev_shm():
    """/dev/shm's names, less CPython's named semaphores (other tests')."""
    try:
        return {n for n in os.listdir("/dev/shm") if not n.startswith("sem.mp-")}
    except FileNotFoundError:
        return set()


class MembershipFaultsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(MCCL_MEMBERSHIP, os.X_OK):
            raise AssertionError(f"{MCCL_MEMBERSHIP} not found; build it or set MCCL_MEMBERSHIP")

    def setUp(self):
        self.ranks = []
        self.shm_before = dev_shm()
        self.tmp = tempfile.mkdtemp(prefix="mccl-membership-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.addCleanup(self.close_all)

    def close_all(self):
        stop_ranks(self.ranks)
        self.ranks = []

    def handle_dir(self):
        """A fresh folder for one run's grow handles (a subtest's newcomer
        must not find the handle of the run before it)."""
        return tempfile.mkdtemp(dir=self.tmp)

    def start(self, world, args, faults, newcomer_args=None):
        """`world` ranks of mccl_membership with the scenario `faults`, plus a
        newcomer process (id 100) when newcomer_args is given."""
        self.run_dir = tempfile.mkdtemp(dir=self.tmp)  # this run's scenario and reports
        path = os.path.join(self.run_dir, "scenario.json")
        with open(path, "w") as f:
            json.dump({"seed": 1, "faults": faults}, f)
        env = dict(SETTINGS, MCCL_FAULTS=path, MCCL_FAULTS_REPORT=os.path.join(self.run_dir, "report"))
        port = free_port()
        started = [Rank(r, world, port, args, env, program=MCCL_MEMBERSHIP) for r in range(world)]
        if newcomer_args is not None:
            started.append(Rank(world, world, port, newcomer_args, env, program=MCCL_MEMBERSHIP))
        self.ranks = started
        return started

    def finish(self, ranks):
        deadline = time.monotonic() + RUN_BOUND
        for r in ranks:
            r.wait_exit(max(0.0, deadline - time.monotonic()))
        for r in ranks:
            self.assertIsNotNone(r.exit_time, f"process {r.rank} still running after {RUN_BOUND:.0f} s "
                                 "(a hang):\n" + "\n".join(x.describe() for x in ranks))

    def everyone(self, ranks):
        return "\n".join(r.describe() for r in ranks)

    def assert_crashed_inside(self, victim, change):
        self.assertEqual(victim.returncode, 99, victim.describe())
        self.assertRegex(victim.output("stderr"), rf"crashes \(exit 99\) during {change}", victim.describe())
        # The fault report, written before the exit, has it too.
        reports = glob.glob(os.path.join(self.run_dir, "report.rank*.json"))
        said = []
        for path in reports:
            with open(path) as f:
                if f"during {change}" in f.read():
                    said.append(path)
        self.assertEqual(len(said), 1, f"reports naming the crash during {change}: {said} of {reports}")

    def assert_change_failed(self, live, change, naming):
        """Every live process's change failed within the bound, naming
        `naming` (a regex)."""
        for r in live:
            line = r.find_line(rf"{change} failed after (\d+) ms: (.*)")
            self.assertIsNotNone(line, r.describe())
            took, why = re.search(rf"{change} failed after (\d+) ms: (.*)", line[1]).groups()
            self.assertLessEqual(int(took), CHANGE_FAILS_WITHIN_MS, r.describe())
            self.assertRegex(why, naming, r.describe())
            print(f"  process {r.rank}: {change} failed after {took} ms", file=sys.stderr, flush=True)

    def assert_one_membership(self, live, expected_ids):
        """Every live process reports the same membership, that of the
        processes expected, and an exact allreduce over it."""
        views = []
        for r in live:
            self.assertEqual(r.returncode, 0, r.describe())
            line = r.find_line(MEMBERSHIP.pattern)
            self.assertIsNotNone(line, r.describe())
            size, ids, bad = MEMBERSHIP.search(line[1]).groups()
            self.assertEqual(int(bad), 0, r.describe())
            views.append((int(size), ids))
        self.assertEqual(len(set(views)), 1, "the live processes disagree on the membership: "
                         + repr(views) + "\n" + self.everyone(live))
        size, ids = views[0]
        self.assertEqual(size, len(expected_ids))
        self.assertEqual([int(x) for x in ids.split(",")], expected_ids)
        print(f"  every live process: size {size}, ids {ids}", file=sys.stderr, flush=True)

    def assert_nothing_left_in_dev_shm(self):
        left = dev_shm() - self.shm_before
        self.assertEqual(left, set(), f"files left in /dev/shm: {sorted(left)}")

    # ------------------------------------------------------------------

    def test_kill_during_shrink(self):
        # 0 serves the rendezvous store the survivors meet in; a frozen rank
        # is hung, not gone: only the liveness verdict tells.
        for mid, kind in ((2, "crash"), (0, "crash"), (2, "freeze")):
            with self.subTest(mid=mid, kind=kind):
                try:
                    self.check_kill_during_shrink(mid, kind)
                finally:
                    self.close_all()

    def check_kill_during_shrink(self, mid, kind):
        first = 4
        ranks = self.start(5, ["shrink", str(first), str(mid)], [
            {"kind": "crash", "rank": first, "seq": 3},
            {"kind": kind, "rank": mid, "during": "shrink"}])
        live = [r for r in ranks if r.rank not in (first, mid)]
        if kind == "crash":
            self.finish(ranks)
            self.assert_crashed_inside(ranks[mid], "shrink")
        else:
            self.finish(live + [ranks[first]])
            self.assertFalse(ranks[mid].exited, ranks[mid].describe())
            self.assertRegex(ranks[mid].output("stderr"), r"freezes \(SIGSTOP\) during shrink",
                             ranks[mid].describe())
        self.assertEqual(ranks[first].returncode, 99, ranks[first].describe())
        for r in live:
            self.assertRegex(r.find_line(r"op failed: ")[1], rf"\brank {first}\b", r.describe())
        # The shrunk communicator's ranks are the survivors'; mid keeps its number.
        self.assert_change_failed(live, "shrink", rf"\brank {mid}\b")
        self.assert_one_membership(live, [r.rank for r in live])
        self.assert_nothing_left_in_dev_shm()

    def test_newcomer_killed_during_grow(self):
        handles = self.handle_dir()
        ranks = self.start(4, ["grow", "4", handles], [{"kind": "crash", "rank": 4, "during": "grow"}],
                           newcomer_args=["join", handles])
        self.finish(ranks)
        newcomer = ranks[4]
        self.assert_crashed_inside(newcomer, "grow")
        old = ranks[:4]
        self.assert_change_failed(old, "grow", r"\brank 4\b")
        self.assert_one_membership(old, [0, 1, 2, 3])
        self.assert_nothing_left_in_dev_shm()

    def test_old_rank_killed_during_grow(self):
        for victim in (1, 0):  # 0's standby store is where the grow meets
            with self.subTest(victim=victim):
                try:
                    self.check_old_rank_killed_during_grow(victim)
                finally:
                    self.close_all()

    def check_old_rank_killed_during_grow(self, victim):
        handles = self.handle_dir()
        ranks = self.start(4, ["grow", str(victim), handles],
                           [{"kind": "crash", "rank": victim, "during": "grow"}],
                           newcomer_args=["join", handles])
        self.finish(ranks)
        self.assert_crashed_inside(ranks[victim], "grow")
        live = [r for r in ranks if r.rank != victim]
        self.assert_change_failed(live[:3], "grow", rf"\brank {victim}\b")
        self.assert_change_failed(live[3:], "join", rf"\brank {victim}\b")
        self.assert_one_membership(live, [r.rank for r in live[:3]] + [100])
        self.assert_nothing_left_in_dev_shm()

    def test_kill_during_reconfigure(self):
        for victim in (2, 0):  # 0's standby store holds the decision
            with self.subTest(victim=victim):
                try:
                    self.check_kill_during_reconfigure(victim)
                finally:
                    self.close_all()

    def check_kill_during_reconfigure(self, victim):
        ranks = self.start(4, ["reconfigure", str(victim)],
                           [{"kind": "crash", "rank": victim, "during": "reconfigure"}])
        self.finish(ranks)
        self.assert_crashed_inside(ranks[victim], "reconfigure")
        live = [r for r in ranks if r.rank != victim]
        self.assert_change_failed(live, "reconfigure", rf"not committed: .*\b(member|rank) {victim}\b")
        for r in live:
            self.assertIsNotNone(r.find_line(rf"still on the old communicator: rank {r.rank} of 4"),
                                 r.describe())
        self.assert_one_membership(live, [r.rank for r in live])
        self.assert_nothing_left_in_dev_shm()


if __name__ == "__main__":
    unittest.main()
