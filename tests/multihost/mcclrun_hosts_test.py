#!/usr/bin/env python3
"""Tests for mcclrun's multi-host side: --hosts, --hostfile, --per-host,
--cwd, --env, per-host env and ips, stdin broadcast and remote launch; and
what mlx.launch users bring: MLX's hostfiles (ring, JACCL, list of ranks),
--backend with the MLX_* variables, and Python scripts without the
executable bit.

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
import socket
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


def write_json(directory, data, name="mlx-hosts.json"):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        json.dump(data, f)
    return path


# A rank's MLX view: the variables, the files they name (content, and the
# path so the test can check it is gone after the job) and MCCL_TRANSPORT.
MLX_DUMP = """\
import json, os
out = {k: os.environ.get(k) for k in ('RANK', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR',
       'MASTER_PORT', 'MCCL_LISTEN_ADDR', 'MCCL_TRANSPORT', 'MLX_RANK', 'MLX_HOSTFILE',
       'MLX_IBV_DEVICES', 'MLX_JACCL_COORDINATOR')}
for name in ('MLX_HOSTFILE', 'MLX_IBV_DEVICES'):
    if out[name]:
        out[name + '_content'] = json.load(open(out[name]))
print(json.dumps(out))
"""


def own_address():
    """A non-loopback IPv4 address of this machine (the one a route out
    would use; connecting a UDP socket sends nothing), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 1))
        except OSError:
            return None
        address = sock.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def port_of(address):
    host, _, port = address.rpartition(":")
    return host, int(port)


class MlxHostfileTest(unittest.TestCase):
    """MLX's hostfile forms, through the ssh stand-in."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def run_dump(self, *args):
        result = mcclrun(*args, "--ssh", SSH, "--master-port", "29999", "--",
                         PYTHON, "-c", MLX_DUMP)
        self.assertEqual(result.returncode, 0, result.stderr)
        return rank_json(result.stdout)

    def assert_files_removed(self, ranks):
        for env in ranks.values():
            for name in ("MLX_HOSTFILE", "MLX_IBV_DEVICES"):
                if env[name]:
                    self.assertFalse(os.path.exists(env[name]), f"{name} {env[name]} was left")

    def assert_mlx_hostfile(self, ranks, ips_of_rank):
        """Every rank sees the same list: its ips, no address twice (the
        ports of one ip distinct; two hosts' free ports may coincide)."""
        content = ranks[0]["MLX_HOSTFILE_content"]
        for env in ranks.values():
            self.assertEqual(env["MLX_HOSTFILE_content"], content)
        self.assertEqual([[port_of(a)[0] for a in entry] for entry in content], ips_of_rank)
        addresses = [port_of(a) for entry in content for a in entry]
        self.assertEqual(len(set(addresses)), len(addresses), content)
        self.assertNotIn(29999, [port for _, port in addresses])

    def test_ring_hostfile(self):
        # MLX's ring hostfile: a bare list, no slots (one rank per host).
        path = write_json(self.tmp.name, [{"ssh": "nodeA", "ips": ["10.9.0.1"]},
                                          {"ssh": "nodeB", "ips": ["10.9.0.2", "10.9.1.2"]}])
        ranks = self.run_dump("--hostfile", path)
        self.assertEqual(sorted(ranks), [0, 1])
        self.assertEqual(ranks[0]["MCCL_LISTEN_ADDR"], "10.9.0.1")
        self.assertEqual(ranks[1]["MCCL_LISTEN_ADDR"], "10.9.0.2,10.9.1.2")
        for env in ranks.values():
            self.assertEqual(env["LOCAL_WORLD_SIZE"], "1")
            self.assertEqual(env["MASTER_ADDR"], "10.9.0.1")
            # Not an MLX-only form and no --backend: the environment of old.
            self.assertIsNone(env["MLX_RANK"])
            self.assertIsNone(env["MLX_HOSTFILE"])
            self.assertIsNone(env["MCCL_TRANSPORT"])

    def test_jaccl_hostfile(self):
        path = write_json(self.tmp.name, [
            {"ssh": "h0", "ips": ["10.9.0.1"], "slots": 2, "rdma": [None, "d01", "d02"]},
            {"ssh": "h1", "ips": ["10.9.0.2"], "rdma": ["d10", None, ["d12a", "d12b"]]},
            {"ssh": "h2", "ips": ["10.9.0.3"], "rdma": ["d20", "d21", None]},
        ])
        ranks = self.run_dump("--hostfile", path)
        self.assertEqual(sorted(ranks), [0, 1, 2, 3])
        # Ranks 0 and 1 share h0: no device between them.
        matrix = [[None, None, "d01", "d02"],
                  [None, None, "d01", "d02"],
                  ["d10", "d10", None, ["d12a", "d12b"]],
                  ["d20", "d20", "d21", None]]
        coordinator = ranks[0]["MLX_JACCL_COORDINATOR"]
        address, port = port_of(coordinator)
        self.assertEqual(address, "10.9.0.1")
        self.assertNotEqual(port, 29999)
        for r, env in ranks.items():
            self.assertEqual(env["MLX_RANK"], str(r))
            self.assertEqual(env["MLX_IBV_DEVICES_content"], matrix)
            self.assertEqual(env["MLX_JACCL_COORDINATOR"], coordinator)
            self.assertIsNone(env["MCCL_TRANSPORT"])
        self.assert_mlx_hostfile(ranks, [["10.9.0.1"], ["10.9.0.1"], ["10.9.0.2"], ["10.9.0.3"]])
        self.assert_files_removed(ranks)

    def test_rank_list_hostfile(self):
        # The file MLX_HOSTFILE names: one rank per entry, on the host of its
        # first ip; loopback runs here, the others through "ssh".
        path = write_json(self.tmp.name, [["127.0.0.1:5000"], ["10.9.0.2:5000", "10.9.1.2:5000"],
                                          ["127.0.0.1:5001"], ["10.9.0.2:5001"]])
        result = mcclrun("--hostfile", path, "--ssh", SSH, "--master-port", "29999", "--verbose",
                         "--", PYTHON, "-c", MLX_DUMP)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stderr, r"mcclrun: rank 0 on this machine(, CPUs [0-9,-]+)?:")
        self.assertIn("mcclrun: rank 1 on 10.9.0.2 (via", result.stderr)
        self.assertRegex(result.stderr, r"mcclrun: rank 2 on this machine(, CPUs [0-9,-]+)?:")
        self.assertIn("mcclrun: rank 3 on 10.9.0.2 (via", result.stderr)
        ranks = rank_json(result.stdout)
        expected = {0: ("0", "127.0.0.1"), 1: ("0", "10.9.0.2,10.9.1.2"),
                    2: ("1", "127.0.0.1"), 3: ("1", "10.9.0.2,10.9.1.2")}
        for r, (local_rank, listen) in expected.items():
            self.assertEqual(ranks[r]["RANK"], str(r))
            self.assertEqual(ranks[r]["MLX_RANK"], str(r))
            self.assertEqual(ranks[r]["LOCAL_RANK"], local_rank)
            self.assertEqual(ranks[r]["LOCAL_WORLD_SIZE"], "2")
            self.assertEqual(ranks[r]["MCCL_LISTEN_ADDR"], listen)
            self.assertEqual(ranks[r]["MASTER_ADDR"], "127.0.0.1")
        remote = ["10.9.0.2", "10.9.1.2"]
        self.assert_mlx_hostfile(ranks, [["127.0.0.1"], remote, ["127.0.0.1"], remote])
        self.assert_files_removed(ranks)

    def test_rank_list_own_address_runs_here(self):
        # An address of this machine that is not loopback: no ssh either.
        address = own_address()
        if address is None:
            self.skipTest("this machine has no non-loopback IPv4 address")
        path = write_json(self.tmp.name, [[f"{address}:5000"], [f"{address}:5001"]])
        result = mcclrun("--hostfile", path, "--ssh", "/nonexistent/ssh", "--verbose",
                         "--", PYTHON, "-c", MLX_DUMP)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stderr, r"mcclrun: rank 1 on this machine(, CPUs [0-9,-]+)?:")
        ranks = rank_json(result.stdout)
        self.assertEqual(ranks[1]["MCCL_LISTEN_ADDR"], address)
        self.assertEqual(ranks[1]["MASTER_ADDR"], address)

    def test_rank_list_with_fewer_ranks(self):
        path = write_json(self.tmp.name, [["127.0.0.1:5000"], ["127.0.0.1:5001"], ["127.0.0.1:5002"]])
        ranks = self.run_dump("--hostfile", path, "-n", "2")
        self.assertEqual(sorted(ranks), [0, 1])
        self.assertEqual(ranks[1]["LOCAL_WORLD_SIZE"], "2")

    def test_bad_files_name_file_entry_and_key(self):
        cases = [
            ([["10.0.0.1:5000"], ["10.0.0.2"]],
             "entry 1: '10.0.0.2' is not \"ip:port\""),
            ([["10.0.0.1:99999"]], "entry 0: '10.0.0.1:99999' is not \"ip:port\""),
            ([["10.0.0.1:5000"], {"ssh": "n2"}], "entry 1: expected a non-empty list"),
            ([["nodeA:5000"]], "entry 0: 'nodeA:5000' is not \"ip:port\""),
            ([{"ssh": "n1", "ips": ["10.0.0.1"], "port": 5}],
             "host 0 (n1): unknown key(s) port"),
            ([{"ssh": "n1", "rdma": [None, "d"]}, {"ssh": "n2", "rdma": ["d"]}],
             "host 1 (n2): \"rdma\" has 1 entries for 2 hosts"),
            ([{"ssh": "n1", "rdma": ["d", "e"]}, {"ssh": "n2", "rdma": ["d", None]}],
             "host 0 (n1): \"rdma\" entry 0 is this host itself"),
            ([{"ssh": "n1", "rdma": [None, "d"]}, {"ssh": "n2"}],
             "host 1 (n2): \"rdma\" is missing"),
            ([{"ssh": "n1", "rdma": "rdma_en3"}], "host 0 (n1): \"rdma\" must be a list"),
            ([{"ssh": "n1", "rdma": [None, 3]}, {"ssh": "n2", "rdma": [3, None]}],
             "host 0 (n1): \"rdma\" must be a list"),
            ([{"ssh": "n1"}, ["10.0.0.1:5000"]], "host 1: expected an object"),
        ]
        for data, text in cases:
            with self.subTest(data=data):
                path = write_json(self.tmp.name, data)
                result = mcclrun("--hostfile", path, "--", "prog")
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(f"{path}: {text}", result.stderr)

    def test_per_host_does_not_fit_a_rank_list(self):
        path = write_json(self.tmp.name, [["127.0.0.1:5000"]])
        result = mcclrun("--hostfile", path, "--per-host", "2", "--", "prog")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn(f"--per-host does not apply to {path}", result.stderr)


class BackendTest(unittest.TestCase):
    """--backend: the transport it asks mccl for and the MLX_* variables."""

    def run_dump(self, *args):
        result = mcclrun("-n", "2", *args, "--", PYTHON, "-c", MLX_DUMP)
        self.assertEqual(result.returncode, 0, result.stderr)
        return rank_json(result.stdout)

    def test_backend_sets_transport_and_mlx_variables(self):
        for backend, transport in (("ring", "tcp"), ("jaccl", "rdma"), ("any", None)):
            with self.subTest(backend=backend):
                ranks = self.run_dump("--backend", backend)
                self.assertEqual(sorted(ranks), [0, 1])
                content = ranks[0]["MLX_HOSTFILE_content"]
                self.assertEqual([[port_of(a)[0] for a in entry] for entry in content],
                                 [["127.0.0.1"], ["127.0.0.1"]])
                ports = [port_of(entry[0])[1] for entry in content]
                self.assertNotEqual(ports[0], ports[1])
                self.assertNotIn(int(ranks[0]["MASTER_PORT"]), ports)
                for r, env in ranks.items():
                    self.assertEqual(env["MCCL_TRANSPORT"], transport)
                    self.assertEqual(env["MLX_RANK"], str(r))
                    self.assertEqual(env["RANK"], str(r))
                    self.assertEqual(env["MLX_HOSTFILE_content"], content)
                    # No "rdma" in any hostfile: nothing for JACCL's setup.
                    self.assertIsNone(env["MLX_IBV_DEVICES"])
                    self.assertIsNone(env["MLX_JACCL_COORDINATOR"])
                    self.assertFalse(os.path.exists(env["MLX_HOSTFILE"]),
                                     "MLX_HOSTFILE outlived mcclrun")

    def test_env_refines_the_backend(self):
        ranks = self.run_dump("--backend", "ring", "--env", "MCCL_TRANSPORT=shm")
        self.assertEqual(ranks[0]["MCCL_TRANSPORT"], "shm")

    def test_no_backend_no_mlx_variables(self):
        ranks = self.run_dump()
        for env in ranks.values():
            self.assertIsNone(env["MLX_RANK"])
            self.assertIsNone(env["MLX_HOSTFILE"])
            self.assertIsNone(env["MCCL_TRANSPORT"])

    def test_remote_ranks_get_the_file_on_their_host(self):
        result = mcclrun("--hosts", "n1,n2", "--ssh", SSH, "--master-addr", "127.0.0.1",
                         "--master-port", "29999", "--backend", "ring", "--",
                         PYTHON, "-c", MLX_DUMP)
        self.assertEqual(result.returncode, 0, result.stderr)
        ranks = rank_json(result.stdout)
        content = ranks[0]["MLX_HOSTFILE_content"]
        # Without "ips": rank 0's host by MASTER_ADDR, the others by name.
        self.assertEqual([[port_of(a)[0] for a in entry] for entry in content],
                         [["127.0.0.1"], ["n2"]])
        for r, env in ranks.items():
            self.assertEqual(env["MCCL_TRANSPORT"], "tcp")
            self.assertEqual(env["MLX_RANK"], str(r))
            self.assertEqual(env["MLX_HOSTFILE_content"], content)
            self.assertFalse(os.path.exists(env["MLX_HOSTFILE"]), "a remote MLX_HOSTFILE was left")

    def test_foreign_backends_are_refused(self):
        for backend, text in (("mpi", "mccl does not run over MPI"),
                              ("nccl", "mccl does not run over NCCL")):
            with self.subTest(backend=backend):
                result = mcclrun("-n", "2", "--backend", backend, "--", "true")
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(f"--backend {backend}: {text}", result.stderr)
                self.assertIn("--backend ring", result.stderr)
                self.assertIn("--backend jaccl", result.stderr)


class PythonScriptTest(unittest.TestCase):
    """Scripts that cannot be executed run with a Python interpreter."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def script(self, name, text, executable=False):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755 if executable else 0o644)
        return path

    def run_in_tmp(self, *args):
        return mcclrun("-n", "2", "--cwd", self.tmp.name, *args)

    def test_py_without_exec_bit(self):
        self.script("show.py", "import os, sys; print(os.environ['RANK'], sys.executable)\n")
        result = self.run_in_tmp("show.py")
        self.assertEqual(result.returncode, 0, result.stderr)
        # The interpreter running mcclrun, not the first python3 on PATH.
        self.assertEqual(sorted(result.stdout.splitlines()),
                         [f"[0] 0 {PYTHON}", f"[1] 1 {PYTHON}"])

    def test_python_shebang_without_exec_bit(self):
        self.script("tool", "#!/usr/bin/env python3\nprint('tool ran')\n")
        result = self.run_in_tmp("./tool")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(result.stdout.splitlines()), ["[0] tool ran", "[1] tool ran"])

    def test_python_option_chooses_the_interpreter(self):
        # A wrapper that marks the environment, so the test sees it was used.
        wrapper = self.script("mypython", f"#!/bin/sh\nMARK=wrapped exec {shlex.quote(PYTHON)} \"$@\"\n",
                              executable=True)
        self.script("show.py", "import os; print(os.environ.get('MARK'))\n", executable=True)
        result = self.run_in_tmp("--python", wrapper, "show.py")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(result.stdout.splitlines()), ["[0] wrapped", "[1] wrapped"])

    def test_executable_script_runs_itself(self):
        # Its #! line picks the interpreter, as before: here not Python at all.
        self.script("run.py", "#!/bin/sh\necho shell ran\n", executable=True)
        result = self.run_in_tmp("./run.py")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(result.stdout.splitlines()), ["[0] shell ran", "[1] shell ran"])

    def test_remote_hosts_use_mccluns_python(self):
        self.script("show.py", "import sys; print(sys.executable)\n")
        result = mcclrun("--hosts", "n1", "--ssh", SSH, "--master-port", "29999", "--verbose",
                         "--cwd", self.tmp.name, "show.py")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.splitlines(), [f"[0] {PYTHON}"])
        self.assertIn(f" {PYTHON} show.py\n", result.stderr)

    def test_remote_host_without_that_python_says_so_and_uses_python3(self):
        # mcclrun runs through a link to this interpreter that the "remote"
        # side removes before the rank starts: the path is not there.
        link = os.path.join(self.tmp.name, "linked-python3")
        os.symlink(PYTHON, link)
        remove_then_ssh = "rm -f " + shlex.quote(link) + "; exec " + SSH + ' "$@"'
        ssh = "sh -c " + shlex.quote(remove_then_ssh) + " sh"
        self.script("show.py", "print('ran')\n")
        result = subprocess.run([link, MCCLRUN, "--hosts", "n1", "--ssh", ssh, "--master-port",
                                 "29999", "--cwd", self.tmp.name, "show.py"],
                                stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=CALL_TIMEOUT)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.splitlines(), ["[0] ran"])
        self.assertIn(f"mcclrun: {link} is not on ", result.stderr)
        self.assertIn("running python3 from its PATH (give --python)", result.stderr)

    def test_missing_script_is_named(self):
        result = self.run_in_tmp("missing.py")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("cannot run 'missing.py': No such file or directory", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
