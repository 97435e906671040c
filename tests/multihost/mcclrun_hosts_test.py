#!/usr/bin/env python3
"""Tests for mcclrun's multi-host side: --hosts, --hostfile, --per-host,
--cwd, --env, per-host env and ips, stdin broadcast and remote launch.

Remote ranks start through local_ssh_shim.py (a stand-in for ssh that runs
the command on this machine), so the remote wrapper's contract -- working
directory, environment, stdin, stopping the program when its ssh session
ends -- is checked without sshd; netns_hosts_test.py does it over real ssh
between network namespaces.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MCCLRUN = os.environ.get("MCCLRUN") or os.path.join(HERE, "..", "..", "tools", "mcclrun")
SHIM = os.path.join(HERE, "local_ssh_shim.py")
sys.path.insert(0, HERE)
from netns_hosts import pid_alive  # noqa: E402
PYTHON = sys.executable
SSH = f"{shlex.quote(PYTHON)} {shlex.quote(SHIM)}"
CALL_TIMEOUT = 60


def mcclrun(*args, stdin_text=None, timeout=CALL_TIMEOUT):
    return subprocess.run([PYTHON, MCCLRUN, *args], input=stdin_text,
                          stdin=None if stdin_text is not None else subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def write_hostfile(directory, hosts):
    path = os.path.join(directory, "hosts.json")
    with open(path, "w") as f:
        json.dump({"hosts": hosts}, f)
    return path


ENV_DUMP = ("import json, os; print(json.dumps({k: os.environ.get(k) for k in "
            "('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', "
            "'MASTER_PORT', 'MCCL_LISTEN_ADDR', 'HOST_TAG', 'JOB')} | {'cwd': os.getcwd()}))")


def rank_json(stdout):
    """{rank: dict} from lines "[r] {json}"."""
    out = {}
    for line in stdout.splitlines():
        prefix, _, text = line.partition(" ")
        out[int(prefix.strip("[]"))] = json.loads(text)
    return out


class PlacementTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_hostfile_places_ranks_and_sets_env(self):
        path = write_hostfile(self.tmp.name, [
            {"ssh": "nodeA", "ips": ["10.9.0.1", "10.9.1.1"], "slots": 2, "env": {"HOST_TAG": "a"}},
            {"ssh": "nodeB", "ips": ["10.9.0.2"], "slots": 3, "env": {"HOST_TAG": "b"}},
        ])
        result = mcclrun("--hostfile", path, "--ssh", SSH, "--master-port", "29999",
                         "--env", "JOB=7", "--cwd", self.tmp.name, "--", PYTHON, "-c", ENV_DUMP)
        self.assertEqual(result.returncode, 0, result.stderr)
        ranks = rank_json(result.stdout)
        self.assertEqual(sorted(ranks), [0, 1, 2, 3, 4])
        for r, env in ranks.items():
            on_a = r < 2
            self.assertEqual(env["RANK"], str(r))
            self.assertEqual(env["WORLD_SIZE"], "5")
            self.assertEqual(env["LOCAL_RANK"], str(r if on_a else r - 2))
            self.assertEqual(env["LOCAL_WORLD_SIZE"], "2" if on_a else "3")
            self.assertEqual(env["MASTER_ADDR"], "10.9.0.1")
            self.assertEqual(env["MASTER_PORT"], "29999")
            self.assertEqual(env["MCCL_LISTEN_ADDR"], "10.9.0.1,10.9.1.1" if on_a else "10.9.0.2")
            self.assertEqual(env["HOST_TAG"], "a" if on_a else "b")
            self.assertEqual(env["JOB"], "7")
            self.assertEqual(os.path.realpath(env["cwd"]), os.path.realpath(self.tmp.name))

    def test_total_and_per_host_counts(self):
        result = mcclrun("--hosts", "n1:2,n2:2", "-n", "3", "--master-port", "29999",
                         "--dry-run", "--", "prog")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual([l.split(":")[0] for l in lines],
                         ["rank 0 on n1 (via ssh)", "rank 1 on n1 (via ssh)", "rank 2 on n2 (via ssh)"])
        result = mcclrun("--hosts", "n1,n2", "--per-host", "2", "--master-port", "29999",
                         "--dry-run", "--", "prog")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(len(lines), 4)
        self.assertIn("LOCAL_RANK=1 ", lines[3])
        self.assertIn("MASTER_ADDR=n1 ", lines[3])
        self.assertTrue(lines[3].startswith("rank 3 on n2"), lines[3])

    def test_dry_run_needs_no_ssh(self):
        # No --master-port: a real run would ask n1 for one; a dry run says so.
        result = mcclrun("--hosts", "n1,n2", "--ssh", "/nonexistent/ssh", "--dry-run", "--", "prog")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("MASTER_PORT='<free port on n1>'", result.stdout)

    def test_bad_hosts_are_named(self):
        cases = [
            (["--hosts", "n1:0"], "slots must be >= 1"),
            (["--hosts", "n1,,n2"], "empty host name"),
            (["--hosts", "n1:2", "-n", "3"], "-n 3 ranks do not fit the 2 slots"),
            (["--hosts", "n1", "--hostfile", "x.json"], "not both"),
            (["--per-host", "2"], "--per-host needs --hosts"),
            (["--hostfile", "/nonexistent.json"], "cannot read hostfile"),
        ]
        for args, text in cases:
            with self.subTest(args=args):
                result = mcclrun(*args, "--", "prog")
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(text, result.stderr)

    def test_bad_hostfiles_are_named(self):
        cases = [
            ([{"ssh": "n1", "ips": ["10.0.0.300"]}], "host 0 (n1): \"ips\" entry '10.0.0.300'"),
            ([{"ssh": "n1"}, {"ssh": "n2", "slot": 2}], "host 1 (n2): unknown key(s) slot"),
            ([{"ips": ["10.0.0.1"]}], "host 0: \"ssh\" must be a non-empty string"),
            ([{"ssh": "n1", "env": ["A=1"]}], "\"env\" must map names to strings"),
            ([], "the host list is empty"),
        ]
        for hosts, text in cases:
            with self.subTest(hosts=hosts):
                result = mcclrun("--hostfile", write_hostfile(self.tmp.name, hosts), "--", "prog")
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(text, result.stderr)

    def test_local_master_with_remote_ranks_is_refused(self):
        result = mcclrun("--hosts", "localhost,n2", "--", "prog")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--master-addr", result.stderr)


class RemoteRunTest(unittest.TestCase):
    def test_stdin_reaches_every_rank(self):
        for hosts in ("localhost:3", "n1:2,n2"):
            with self.subTest(hosts=hosts):
                result = mcclrun("--hosts", hosts, "--ssh", SSH, "--master-addr", "127.0.0.1",
                                 "--master-port", "29999", "--",
                                 PYTHON, "-c", "import sys; print(sys.stdin.read().strip().upper())",
                                 stdin_text="hello\n")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(sorted(result.stdout.splitlines()),
                                 ["[0] HELLO", "[1] HELLO", "[2] HELLO"])

    def test_remote_failure_stops_the_others(self):
        with tempfile.TemporaryDirectory() as tmp:
            # Rank 1 fails; ranks 0 and 2 would sleep for a minute and record
            # their pids so the test can check nothing survived.
            # Rank 1 fails only once all three have recorded themselves.
            code = ("import os, sys, time; r = os.environ['RANK']; "
                    f"d = {tmp!r}; open(os.path.join(d, r + '.tmp'), 'w').write(str(os.getpid())); "
                    "os.rename(os.path.join(d, r + '.tmp'), os.path.join(d, r)); "
                    "[time.sleep(0.05) for _ in range(400) if len(os.listdir(d)) < 3 "
                    "or any(n.endswith('.tmp') for n in os.listdir(d))]; "
                    "sys.exit(3) if r == '1' else time.sleep(60)")
            start = time.monotonic()
            result = mcclrun("--hosts", "n1,n2,n3", "--ssh", SSH, "--master-port", "29999",
                             "--kill-grace", "2", "--", PYTHON, "-c", code)
            self.assertLess(time.monotonic() - start, 40)
            self.assertEqual(result.returncode, 3, result.stderr)
            self.assertIn("rank 1 on n2 (ssh pid", result.stderr)
            self.assertIn("exited with status 3; stopping the other 2 ranks", result.stderr)
            deadline = time.monotonic() + 10
            pids = [int(open(os.path.join(tmp, name)).read()) for name in os.listdir(tmp)]
            self.assertEqual(len(pids), 3)
            alive = pids
            while alive and time.monotonic() < deadline:
                alive = [p for p in pids if pid_alive(p)]
                time.sleep(0.1)
            for pid in alive:
                os.kill(pid, signal.SIGKILL)
            self.assertEqual(alive, [], "remote ranks outlived mcclrun")

    def test_unreachable_host_is_named(self):
        result = mcclrun("--hosts", "n1,unreachable", "--ssh", SSH, "--master-port", "29999",
                         "--", PYTHON, "-c", "import time; time.sleep(30)")
        self.assertEqual(result.returncode, 255, result.stderr)
        self.assertIn("[1] ssh: connect to host unreachable", result.stderr)
        self.assertIn("rank 1 on unreachable (ssh pid", result.stderr)
        self.assertIn("ssh could not reach the host", result.stderr)

    def test_verbose_names_the_hosts(self):
        result = mcclrun("--hosts", "n1,n2", "--ssh", SSH, "--master-port", "29999", "--verbose",
                         "--", "true")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("mcclrun: rank 0 on n1 (via", result.stderr)
        self.assertIn("mcclrun: rank 1 on n2 (via", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
