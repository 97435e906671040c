#!/usr/bin/env python3
"""Tests for tools/mcclrun, the local multi-rank launcher.

The ranks here are tiny sh and Python programs, so the launcher's contract
(environment, output, failure handling, cleanup) is checked without any mccl
binary.  Set MCCLRUN to test a launcher other than the one in this tree.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MCCLRUN = os.environ.get("MCCLRUN") or os.path.join(HERE, "..", "..", "tools", "mcclrun")
PYTHON = sys.executable
# Generous for loaded CI machines, yet far below the 60 s the ranks sleep.
CALL_TIMEOUT = 30


def mcclrun(*args, timeout=CALL_TIMEOUT, env=None):
    """Run mcclrun to completion; returns (CompletedProcess, seconds taken)."""
    start = time.monotonic()
    result = subprocess.run(
        [PYTHON, MCCLRUN, *args], stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=timeout, env=env)
    return result, time.monotonic() - start


def python_rank(code):
    return [PYTHON, "-c", code]


def process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # An orphan that was killed may linger as a zombie until init reaps it.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class PidDirMixin:
    """Ranks record their pids here so the test can look for survivors."""

    def setUp(self):
        super().setUp()
        self.pid_dir = tempfile.mkdtemp(prefix="mcclrun-test-")
        self.addCleanup(shutil.rmtree, self.pid_dir, ignore_errors=True)
        self.addCleanup(self.kill_recorded)

    def recorded_pids(self):
        pids = []
        for name in os.listdir(self.pid_dir):
            if name.endswith(".tmp"):
                continue
            with open(os.path.join(self.pid_dir, name)) as f:
                text = f.read().strip()
            if text:
                pids.append(int(text))
        return pids

    def kill_recorded(self):
        for pid in self.recorded_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def assert_no_survivors(self, expected_count):
        pids = self.recorded_pids()
        self.assertEqual(len(pids), expected_count, f"recorded pids: {pids}")
        deadline = time.monotonic() + 5
        alive = [p for p in pids if process_alive(p)]
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [p for p in alive if process_alive(p)]
        self.assertEqual(alive, [], "processes outlived mcclrun")

    def sh_rank(self, body, prelude=""):
        """A sh rank that records itself and a sleeping child, then runs body.

        The sleeping child is in the rank's process group, so it is how the
        test sees whether mcclrun stops grandchildren too.  prelude runs
        before the child starts, so the child inherits e.g. an ignored signal.
        """
        script = (
            f'{prelude} d={self.pid_dir}; '
            'echo $$ > "$d/rank$RANK.tmp"; mv "$d/rank$RANK.tmp" "$d/rank$RANK"; '
            'sleep 60 & echo $! > "$d/child$RANK.tmp"; mv "$d/child$RANK.tmp" "$d/child$RANK"; '
            f'{body}')
        return ["/bin/sh", "-c", script]

    def sh_wait_until_recorded(self, count):
        """sh snippet: wait until count pid files exist, so none is missed."""
        return (f'while [ $(ls {self.pid_dir} | grep -vc tmp) -lt {count} ]; '
                'do sleep 0.02; done; ')

    def wait_for_files(self, count, timeout=10):
        deadline = time.monotonic() + timeout
        while len(self.recorded_pids()) < count and time.monotonic() < deadline:
            time.sleep(0.02)


def json_per_rank(test, stdout, n):
    """The one JSON value each of ranks 0..n-1 printed, as mcclrun prefixes
    it ("[rank] value"), by rank; any other line fails the test."""
    values = {}
    for line in stdout.splitlines():
        match = re.fullmatch(r"\[(\d+)\] ([\[{].*)", line)
        test.assertIsNotNone(match, f"unexpected line {line!r}")
        values[int(match.group(1))] = json.loads(match.group(2))
    test.assertEqual(sorted(values), list(range(n)))
    return values


class EnvironmentTest(unittest.TestCase):
    def run_env_dump(self, *options, n=4):
        code = ("import json, os; print(json.dumps({k: os.environ.get(k) for k in "
                "['RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', "
                "'MASTER_ADDR', 'MASTER_PORT', 'MCCL_TEST_A', 'MCCL_TEST_B']}))")
        result, _ = mcclrun("-n", str(n), *options, "--", *python_rank(code))
        self.assertEqual(result.returncode, 0, result.stderr)
        return json_per_rank(self, result.stdout, n)

    def test_contract(self):
        envs = self.run_env_dump()
        ports = {env["MASTER_PORT"] for env in envs.values()}
        self.assertEqual(len(ports), 1, "ranks disagree on MASTER_PORT")
        self.assertTrue(1 <= int(ports.pop()) <= 65535)
        for rank, env in envs.items():
            self.assertEqual(env["RANK"], str(rank))
            self.assertEqual(env["LOCAL_RANK"], str(rank))
            self.assertEqual(env["WORLD_SIZE"], "4")
            self.assertEqual(env["LOCAL_WORLD_SIZE"], "4")
            self.assertEqual(env["MASTER_ADDR"], "127.0.0.1")

    def test_overrides_and_extra_env(self):
        os.environ["MCCL_TEST_B"] = "inherited"
        try:
            envs = self.run_env_dump("--master-port", "23456", "--master-addr", "localhost",
                                     "--env", "MCCL_TEST_A=x=y", "-x", "MCCL_TEST_B", n=2)
        finally:
            del os.environ["MCCL_TEST_B"]
        for env in envs.values():
            self.assertEqual(env["MASTER_PORT"], "23456")
            self.assertEqual(env["MASTER_ADDR"], "localhost")
            self.assertEqual(env["MCCL_TEST_A"], "x=y")
            self.assertEqual(env["MCCL_TEST_B"], "inherited")

    def test_stdin_is_empty(self):
        result, _ = mcclrun("-n", "2", "--", *python_rank(
            "import sys; print(len(sys.stdin.read()))"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(result.stdout.splitlines()), ["[0] 0", "[1] 0"])


class BindingTest(unittest.TestCase):
    """--bind-to: by default the ranks here get equal, disjoint shares of the
    CPUs mcclrun may use (when there are enough); none leaves them all."""

    CODE = "import json, os; print(json.dumps(sorted(os.sched_getaffinity(0))))"

    def cpus_of_ranks(self, n, *options, usable=None):
        # Run under a chosen affinity, so the test means the same on any machine.
        preexec = (lambda: os.sched_setaffinity(0, usable)) if usable else None
        start = time.monotonic()
        result = subprocess.run(
            [PYTHON, MCCLRUN, "-n", str(n), *options, "--", *python_rank(self.CODE)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CALL_TIMEOUT,
            preexec_fn=preexec)
        self.assertLess(time.monotonic() - start, CALL_TIMEOUT)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json_per_rank(self, result.stdout, n)

    def test_ranks_get_disjoint_equal_shares(self):
        usable = sorted(os.sched_getaffinity(0))
        n = 2 if len(usable) >= 2 else 1
        cpus = self.cpus_of_ranks(n)
        share = len(usable) // n
        self.assertEqual(cpus[0], usable[:share])
        if n == 2:
            self.assertEqual(cpus[1], usable[share:2 * share])

    def test_one_rank_per_cpu_when_they_are_as_many(self):
        usable = sorted(os.sched_getaffinity(0))
        if len(usable) < 2:
            self.skipTest(f"needs 2 CPUs, this process may use {len(usable)}")
        cpus = self.cpus_of_ranks(2, usable=usable[:2])
        self.assertEqual(cpus, {0: [usable[0]], 1: [usable[1]]})

    def test_more_ranks_than_cpus_are_not_bound(self):
        usable = sorted(os.sched_getaffinity(0))
        cpus = self.cpus_of_ranks(2, usable=usable[:1])
        self.assertEqual(cpus, {0: usable[:1], 1: usable[:1]})
        cpus = self.cpus_of_ranks(len(usable) + 1)
        self.assertTrue(all(c == usable for c in cpus.values()), cpus)

    def test_bound_ranks_give_their_helper_threads_every_rank_cpu(self):
        usable = sorted(os.sched_getaffinity(0))
        if len(usable) < 2:
            self.skipTest(f"needs 2 CPUs, this process may use {len(usable)}")
        code = "import os; print(os.environ.get('MCCL_HELPER_CPUS', 'unset'))"

        def helper_cpus(*options, env=None):
            result = subprocess.run(
                [PYTHON, MCCLRUN, "-n", "2", *options, "--", *python_rank(code)],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CALL_TIMEOUT,
                env=env, preexec_fn=lambda: os.sched_setaffinity(0, usable[:2]))
            self.assertEqual(result.returncode, 0, result.stderr)
            return sorted(result.stdout.split())

        both = f"{usable[0]}-{usable[1]}" if usable[1] == usable[0] + 1 else f"{usable[0]},{usable[1]}"
        def each_rank(value):
            return sorted(["[0]", "[1]", value, value])

        self.assertEqual(helper_cpus(), each_rank(both))
        self.assertEqual(helper_cpus("--bind-to", "none"), each_rank("unset"))
        own = {**os.environ, "MCCL_HELPER_CPUS": str(usable[0])}
        self.assertEqual(helper_cpus(env=own), each_rank(str(usable[0])))

    def test_none_leaves_every_cpu(self):
        usable = sorted(os.sched_getaffinity(0))
        cpus = self.cpus_of_ranks(2, "--bind-to", "none")
        self.assertEqual(cpus, {0: usable, 1: usable})

    def test_verbose_names_the_cpus(self):
        usable = sorted(os.sched_getaffinity(0))
        if len(usable) < 2:
            self.skipTest(f"needs 2 CPUs, this process may use {len(usable)}")
        result, _ = mcclrun("-n", "2", "--verbose", "--", "true")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"rank 1 on this machine, CPUs {usable[len(usable) // 2]}", result.stderr)


class OutputTest(unittest.TestCase):
    LINES = 300
    PAYLOAD = "x" * 300

    def test_lines_prefixed_and_whole(self):
        # Each line is written in three flushed pieces to provoke short reads.
        code = f"""
import os, sys
r = os.environ["RANK"]
for i in range({self.LINES}):
    for piece in ("rank " + r, " line %d " % i, "{self.PAYLOAD}\\n"):
        sys.stdout.write(piece)
        sys.stdout.flush()
    if i % 50 == 0:
        sys.stderr.write("rank %s warning %d\\n" % (r, i))
        sys.stderr.flush()
sys.stdout.write("no newline at the end")
"""
        result, _ = mcclrun("-n", "4", "--", *python_rank(code))
        self.assertEqual(result.returncode, 0, result.stderr)
        line_re = re.compile(r"\[(\d)\] rank (\d) line (\d+) " + self.PAYLOAD)
        next_line = {r: 0 for r in range(4)}
        tails = set()
        for line in result.stdout.splitlines():
            if line.endswith("no newline at the end"):
                tails.add(line)
                continue
            match = line_re.fullmatch(line)
            self.assertIsNotNone(match, f"mangled line {line[:80]!r}")
            prefix_rank, rank, number = (int(g) for g in match.groups())
            self.assertEqual(prefix_rank, rank)
            self.assertEqual(number, next_line[rank], "lines lost or reordered")
            next_line[rank] += 1
        self.assertEqual(next_line, {r: self.LINES for r in range(4)})
        self.assertEqual(tails, {f"[{r}] no newline at the end" for r in range(4)})
        warnings = [l for l in result.stderr.splitlines() if "warning" in l]
        self.assertEqual(len(warnings), 4 * 6)
        for line in warnings:
            self.assertRegex(line, r"^\[(\d)\] rank \1 warning \d+$")

    def test_no_prefix(self):
        result, _ = mcclrun("-n", "2", "--no-prefix", "--", "/bin/sh", "-c", "echo plain")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.splitlines(), ["plain", "plain"])

    def test_program_options_are_not_mcclrun_options(self):
        result, _ = mcclrun("-n", "1", "/bin/sh", "-c", 'printf "%s" "$1"', "sh", "-n")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "[0] -n\n")


class ExitStatusTest(PidDirMixin, unittest.TestCase):
    def test_all_ranks_succeed(self):
        result, _ = mcclrun("-n", "3", "--", "/bin/sh", "-c", "exit 0")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "")

    def test_rank_exit_status_is_propagated(self):
        cmd = self.sh_rank('if [ "$RANK" = 1 ]; then '
                           + self.sh_wait_until_recorded(8) + 'exit 3; fi; wait')
        result, elapsed = mcclrun("-n", "4", "--", *cmd)
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertRegex(result.stderr, r"mcclrun: rank 1 \(pid \d+\) exited with status 3")
        self.assertLess(elapsed, 10)
        self.assert_no_survivors(8)

    def test_killed_rank_stops_the_others(self):
        body = ('if [ "$RANK" = 2 ]; then '
                + self.sh_wait_until_recorded(8) + 'kill -9 $$; fi; wait')
        result, elapsed = mcclrun("-n", "4", "--", *self.sh_rank(body))
        self.assertEqual(result.returncode, 128 + signal.SIGKILL, result.stderr)
        with open(os.path.join(self.pid_dir, "rank2")) as f:
            pid2 = int(f.read())
        self.assertIn(f"mcclrun: rank 2 (pid {pid2}) was killed by signal SIGKILL; "
                      "stopping the other 3 ranks", result.stderr)
        self.assertLess(elapsed, 10)
        self.assert_no_survivors(8)

    def test_ranks_ignoring_sigterm_are_killed(self):
        cmd = self.sh_rank('if [ "$RANK" = 0 ]; then '
                           + self.sh_wait_until_recorded(4) + 'exit 7; fi; wait',
                           prelude='trap "" TERM;')
        result, elapsed = mcclrun("-n", "2", "--kill-grace", "0.5", "--", *cmd)
        self.assertEqual(result.returncode, 7, result.stderr)
        self.assertIn("rank 0", result.stderr)
        self.assertIn("ignored SIGTERM: 1", result.stderr)
        self.assertLess(elapsed, 10)
        self.assert_no_survivors(4)

    def test_timeout(self):
        cmd = self.sh_rank('if [ "$RANK" = 1 ]; then exit 0; fi; wait')
        result, elapsed = mcclrun("-n", "3", "--timeout", "1", "--", *cmd)
        self.assertEqual(result.returncode, 124, result.stderr)
        self.assertIn("timeout", result.stderr)
        self.assertRegex(result.stderr, r"still running: 0, 2\b")
        self.assertLess(elapsed, 10)
        self.assert_no_survivors(6)

    def test_sigterm_is_forwarded(self):
        # The trap is set before the rank records itself: once the test has
        # seen every record, a TERM cannot arrive before it.
        cmd = self.sh_rank('wait', prelude='trap "echo got TERM; exit 9" TERM;')
        proc = subprocess.Popen([PYTHON, MCCLRUN, "-n", "2", "--", *cmd],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            self.wait_for_files(4)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=CALL_TIMEOUT)
        finally:
            proc.kill()
            proc.wait()
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        self.assertEqual(sorted(out.splitlines()), ["[0] got TERM", "[1] got TERM"])
        self.assertIn("SIGTERM", err)
        self.assert_no_survivors(4)


class UsageTest(unittest.TestCase):
    def test_bad_rank_count(self):
        for value in ("0", "-3", "many"):
            with self.subTest(n=value):
                result, _ = mcclrun("-n", value, "--", "/bin/true")
                self.assertEqual(result.returncode, 2)
                self.assertIn("-n must be", result.stderr)

    def test_missing_program(self):
        result, _ = mcclrun("-n", "2")
        self.assertEqual(result.returncode, 2)
        self.assertIn("no program given", result.stderr)

    def test_program_not_found(self):
        for program in ("/nonexistent/mccl-program", "mccl-no-such-program"):
            with self.subTest(program=program):
                result, _ = mcclrun("-n", "2", "--", program)
                self.assertEqual(result.returncode, 2)
                self.assertIn(f"mcclrun: cannot run '{program}': No such file or directory",
                              result.stderr)

    def test_unknown_option(self):
        result, _ = mcclrun("-n", "2", "--bogus", "/bin/true")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--bogus", result.stderr)

    def test_help_explains_environment(self):
        result, _ = mcclrun("--help")
        self.assertEqual(result.returncode, 0)
        for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "--timeout"):
            self.assertIn(name, result.stdout)

    def test_dry_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "ran")
            result, _ = mcclrun("-n", "3", "--env", "MCCL_X=1", "--dry-run", "--",
                                "/bin/touch", marker)
            self.assertFalse(os.path.exists(marker), "--dry-run started a rank")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(len(lines), 3)
        port = None
        for rank, line in enumerate(lines):
            self.assertIn(f"RANK={rank} ", line)
            self.assertIn("WORLD_SIZE=3 ", line)
            self.assertIn("MASTER_ADDR=127.0.0.1 ", line)
            self.assertIn("MCCL_X=1 ", line)
            self.assertTrue(line.endswith(f"/bin/touch {marker}"), line)
            line_port = re.search(r"MASTER_PORT=(\d+)", line).group(1)
            self.assertIn(port, (None, line_port))
            port = line_port


if __name__ == "__main__":
    unittest.main(verbosity=2)
