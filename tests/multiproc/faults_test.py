#!/usr/bin/env python3
"""Failure behaviour of mccl across real processes, one rank per process.

What this file proves, with the mccl_check rank program over loopback TCP:

* A rank SIGKILLed in the middle of an allreduce does not hang the others:
  every survivor's op fails within the watchdog bound (MCCL_TIMEOUT_MS plus
  5 s), the error names the lost rank, and the survivor exits with status 3.
* Finalize does not wait for a peer that is already gone.
* A rank that never shows up makes the others fail at connect time, naming
  the missing rank, instead of waiting forever.
* Configuration mistakes (MCCL_PORT_BASE colliding with MASTER_PORT, a bad
  value, an unknown MCCL_ variable) fail fast with a message naming them.

The harness starts the ranks itself rather than through mcclrun, because
mcclrun stops every rank as soon as one dies, which is exactly the behaviour
under test here.  Set MCCL_CHECK to the mccl_check binary to test; by default
the one in ../../build is used.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MCCL_CHECK = os.path.abspath(
    os.environ.get("MCCL_CHECK")
    or os.path.join(HERE, "..", "..", "build", "tests", "multiproc", "mccl_check"))

# Ranks need time to start and connect on a loaded CI machine; far above what
# it takes on an idle one (well under a second).
STARTUP_TIMEOUT = 30.0
# Enough elements that each allreduce takes a while, so the kill lands
# mid-op rather than between ops.
STRESS_COUNT = 4194304
OP_TIMEOUT_MS = 10000
# The watchdog fails an op at most 5 s after its deadline.
FAILURE_BOUND = OP_TIMEOUT_MS / 1000 + 5.0
# How long reaping a killed process or draining its pipes may take.
CLEANUP_TIMEOUT = 10.0


def free_port():
    """A port nobody listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env():
    """The parent environment without inherited MCCL_ variables.

    mccl rejects unknown MCCL_ variables, so the harness's own MCCL_CHECK
    would make every rank fail; and a setting exported by the caller (say a
    different MCCL_TIMEOUT_MS) would change the bounds asserted here.  Each
    test sets the MCCL_ variables it depends on.
    """
    return {k: v for k, v in os.environ.items() if not k.startswith("MCCL_")}


class Rank:
    """One rank process with its output collected by reader threads.

    Every line is stamped with time.monotonic() when read, and a waiter
    thread stamps the exit, so the tests can time events without polling.
    The pipes are drained continuously, so a chatty rank never blocks.
    """

    def __init__(self, rank, world, port, mode_args, extra_env=None, program=None):
        self.rank = rank
        env = base_env()
        env.update(RANK=str(rank), WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.update(extra_env or {})
        self._cond = threading.Condition()
        self._lines = {"stdout": [], "stderr": []}  # (monotonic time, text)
        self._eof = {"stdout": False, "stderr": False}
        self.returncode = None
        self.exit_time = None
        # A session of its own: the rank is its own process group, so
        # killing the group also gets anything it might have started.
        self.proc = subprocess.Popen(
            [program or MCCL_CHECK, *mode_args], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self._threads = [
            threading.Thread(target=self._read, args=("stdout", self.proc.stdout), daemon=True),
            threading.Thread(target=self._read, args=("stderr", self.proc.stderr), daemon=True),
        ]
        self._waiter = threading.Thread(target=self._wait, daemon=True)
        for t in self._threads + [self._waiter]:
            t.start()

    def _read(self, name, pipe):
        try:
            for raw in iter(pipe.readline, b""):
                now = time.monotonic()
                with self._cond:
                    self._lines[name].append((now, raw.decode(errors="replace").rstrip("\n")))
                    self._cond.notify_all()
        except (OSError, ValueError):
            pass  # the pipe was closed under us during cleanup
        finally:
            with self._cond:
                self._eof[name] = True
                self._cond.notify_all()

    def _wait(self):
        # Only this thread waits on the process, so exit_time is the moment
        # the exit was seen, not the moment some test got around to asking.
        rc = self.proc.wait()
        now = time.monotonic()
        with self._cond:
            self.returncode = rc
            self.exit_time = now
            self._cond.notify_all()

    @property
    def exited(self):
        with self._cond:
            return self.exit_time is not None

    def find_line(self, pattern, stream="stdout"):
        """(time, line) of the first line matching pattern, or None."""
        regex = re.compile(pattern)
        with self._cond:
            for stamp, line in self._lines[stream]:
                if regex.search(line):
                    return stamp, line
        return None

    def wait_for_line(self, pattern, timeout, stream="stdout"):
        """Like find_line, but waits up to timeout; gives up early on exit."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        found = None

        def ready():
            nonlocal found
            for stamp, line in self._lines[stream]:
                if regex.search(line):
                    found = (stamp, line)
                    return True
            return self._eof[stream]

        with self._cond:
            self._cond.wait_for(ready, max(0.0, deadline - time.monotonic()))
        return found

    def wait_exit(self, timeout):
        """True once the rank has exited (and both pipes hit end of file)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._cond.wait_for(
                lambda: self.exit_time is not None and all(self._eof.values()),
                max(0.0, deadline - time.monotonic()))
            return self.exit_time is not None

    def output(self, stream):
        with self._cond:
            return "\n".join(line for _, line in self._lines[stream])

    def describe(self):
        """Everything the rank said, for assertion messages."""
        return (f"rank {self.rank} (exit status {self.returncode}):\n"
                f"--- stdout ---\n{self.output('stdout')}\n"
                f"--- stderr ---\n{self.output('stderr')}")

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self):
        """Kill, reap and drain; safe to call more than once."""
        self.kill()
        self._waiter.join(CLEANUP_TIMEOUT)
        for t in self._threads:
            t.join(CLEANUP_TIMEOUT)
        for pipe in (self.proc.stdout, self.proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass


def stop_ranks(ranks):
    """Kill every rank's process group first, then reap and drain each: the
    ranks stop together rather than one at a time while the rest notice
    their peers vanish. SIGKILL also ends a stopped (SIGSTOPped) rank."""
    for r in ranks:
        r.kill()
    for r in ranks:
        r.close()


class RankTest(unittest.TestCase):
    """What every test of ranks as processes needs: the rank program checked
    once, the ranks started by start() stopped and reaped after each test."""

    @classmethod
    def setUpClass(cls):
        if not os.access(MCCL_CHECK, os.X_OK):
            raise AssertionError(f"mccl_check not found at {MCCL_CHECK}; build it or set MCCL_CHECK")

    def setUp(self):
        self.ranks = []
        self.addCleanup(self.close_all)

    def close_all(self):
        stop_ranks(self.ranks)
        self.ranks = []

    def start(self, world, mode_args, ranks=None, port=None, extra_env=None):
        port = port or free_port()
        started = [Rank(r, world, port, mode_args, extra_env)
                   for r in (range(world) if ranks is None else ranks)]
        self.ranks.extend(started)
        return started


class FaultTest(RankTest):
    @staticmethod
    def log(text):
        print(text, file=sys.stderr, flush=True)

    # 1 ------------------------------------------------------------------

    def test_sigkill_mid_allreduce(self):
        cases = [(2, 1), (3, 2), (4, 3), (4, 1)]  # (world, victim)
        for world, victim in cases:
            with self.subTest(world=world, victim=victim):
                try:
                    self.check_sigkill(world, victim)
                finally:
                    self.close_all()

    def check_sigkill(self, world, victim):
        ranks = self.start(world, ["stress", str(STRESS_COUNT)],
                           extra_env={"MCCL_TIMEOUT_MS": str(OP_TIMEOUT_MS)})
        deadline = time.monotonic() + STARTUP_TIMEOUT
        for r in ranks:
            seen = r.wait_for_line(r"stress started", max(0.0, deadline - time.monotonic()))
            self.assertIsNotNone(seen, "a rank did not start the stress loop:\n"
                                 + "\n".join(x.describe() for x in ranks))
        # Let the loop get well into an allreduce before the kill.
        time.sleep(0.3)
        early = [r for r in ranks if r.exited]
        self.assertEqual(early, [], "ranks exited before the kill:\n"
                         + "\n".join(x.describe() for x in ranks))

        killed_at = time.monotonic()
        ranks[victim].kill()

        survivors = [r for r in ranks if r.rank != victim]
        # Wait a little past the bound, so a late exit is measured and
        # reported as late rather than as a hang.
        wait_until = killed_at + FAILURE_BOUND + 5.0
        for r in survivors:
            r.wait_exit(max(0.0, wait_until - time.monotonic()))

        # Report every survivor before asserting, so CI logs show them all.
        results = []
        for r in survivors:
            took = None if r.exit_time is None else r.exit_time - killed_at
            failure = r.find_line(r"op failed after")
            line = failure[1] if failure else "(no 'op failed after' line)"
            shown = "did not exit" if took is None else f"exited {r.returncode} after {took:.2f} s"
            self.log(f"  world {world}, victim {victim}: rank {r.rank} {shown}: {line}")
            results.append((r, took, failure))

        for r, took, failure in results:
            self.assertIsNotNone(took, f"rank {r.rank} still running {FAILURE_BOUND + 5.0:.0f} s "
                                 f"after rank {victim} was killed:\n{r.describe()}")
            self.assertEqual(r.returncode, 3, f"rank {r.rank} should exit 3 (op failed):\n"
                             + r.describe())
            self.assertLessEqual(took, FAILURE_BOUND,
                                 f"rank {r.rank} took {took:.2f} s to fail:\n{r.describe()}")
            self.assertIsNotNone(failure, r.describe())
            # The error text follows "op failed after N ms:"; the line's own
            # "rank N:" prefix names the survivor, not the victim.  A bare
            # "rank {victim}" is not enough either: the text also says which
            # ring neighbour the op was "waiting on", which may happen to be
            # the victim while the cause blames a live rank.  The cause
            # ("lost rank N", possibly relayed as "rank M aborted the
            # communicator: lost rank N") must be the victim.
            error_text = re.split(r"op failed after \d+ ms:", failure[1], maxsplit=1)[-1]
            self.assertRegex(error_text, rf"\blost rank {victim}\b",
                             f"rank {r.rank}'s error does not name rank {victim} as the lost rank")

    # 2 ------------------------------------------------------------------

    def test_finalize_with_peer_gone(self):
        rank0, rank1 = self.start(2, ["finalize-alone"])
        seen = rank0.wait_for_line(r"rank 0: finalize starts", STARTUP_TIMEOUT)
        self.assertIsNotNone(seen, "rank 0 never reached finalize:\n"
                             + rank0.describe() + "\n" + rank1.describe())
        self.assertTrue(rank0.wait_exit(CLEANUP_TIMEOUT),
                        f"rank 0 still running {CLEANUP_TIMEOUT:.0f} s into finalize:\n"
                        + rank0.describe())
        took = rank0.exit_time - seen[0]
        self.log(f"  rank 0 exited {rank0.returncode} {took:.3f} s after 'finalize starts'")
        self.assertEqual(rank0.returncode, 0, rank0.describe())
        self.assertLessEqual(took, 1.0, f"finalize took {took:.3f} s:\n{rank0.describe()}")
        self.assertTrue(rank1.wait_exit(CLEANUP_TIMEOUT), rank1.describe())
        self.assertEqual(rank1.returncode, 0, rank1.describe())

    # 3 ------------------------------------------------------------------

    def test_connect_timeout_names_missing_rank(self):
        started_at = time.monotonic()
        present = self.start(3, ["barrier"], ranks=[0, 1],
                             extra_env={"MCCL_CONNECT_TIMEOUT_MS": "2000"})
        for r in present:
            r.wait_exit(max(0.0, started_at + 15.0 - time.monotonic()))
        for r in present:
            took = "did not exit" if r.exit_time is None else f"{r.exit_time - started_at:.2f} s"
            self.log(f"  rank {r.rank} ({took}, status {r.returncode}): "
                     f"{r.output('stderr').strip()}")
        for r in present:
            self.assertIsNotNone(r.exit_time, f"rank {r.rank} still waiting after 15 s:\n"
                                 + r.describe())
            self.assertNotEqual(r.returncode, 0, r.describe())
            # The missing rank is named in a list ("rank(s) 2" today, perhaps
            # "rank 2" or "rank(s) 2, 3"): accept either spelling, but 2 must
            # be in the list, not merely somewhere in the text.
            self.assertRegex(r.output("stderr"), r"\brank(?:\(s\))? (?:\d+, )*2\b",
                             r.describe())

    # 4 ------------------------------------------------------------------

    def test_port_clash(self):
        port = free_port()
        started_at = time.monotonic()
        rank0, rank1 = self.start(2, ["barrier"], port=port,
                                  extra_env={"MCCL_PORT_BASE": str(port)})
        self.assertTrue(rank0.wait_exit(10.0), "rank 0 did not fail within 10 s:\n"
                        + rank0.describe())
        self.log(f"  rank 0 ({rank0.exit_time - started_at:.2f} s, status {rank0.returncode}): "
                 f"{rank0.output('stderr').strip()}")
        # Rank 1 has no store to talk to; its fate does not matter here.
        rank1.close()
        self.assertNotEqual(rank0.returncode, 0, rank0.describe())
        err = rank0.output("stderr")
        self.assertIn("MCCL_PORT_BASE", err)
        self.assertIn("MASTER_PORT", err)

    # 5 ------------------------------------------------------------------

    def test_bad_env_value(self):
        cases = [({"MCCL_CHUNK_BYTES": "12Q"}, ["MCCL_CHUNK_BYTES", "12Q"]),
                 ({"MCCL_TYPO_VAR": "1"}, ["MCCL_TYPO_VAR"])]
        for extra_env, wanted in cases:
            with self.subTest(env=extra_env):
                try:
                    (rank0,) = self.start(1, ["barrier"], extra_env=extra_env)
                    self.assertTrue(rank0.wait_exit(10.0), "still running after 10 s:\n"
                                    + rank0.describe())
                    self.assertNotEqual(rank0.returncode, 0, rank0.describe())
                    err = rank0.output("stderr")
                    for text in wanted:
                        self.assertIn(text, err)
                finally:
                    self.close_all()


if __name__ == "__main__":
    unittest.main()
