#!/usr/bin/env python3
"""mcclrun forwards what MLX users ask it to, over real ssh between 2
emulated hosts (network namespaces, sshd): -x NAME gives remote ranks the
variable's value (PYTHONPATH included), a Python script runs with the
interpreter running mcclrun on remote hosts too (not the first python3 on
sshd's PATH), --hosts NODE -n 4 places 4 ranks on one host, and
mlx.launch's --starting-port and --connections-per-ip become mccl's
settings. Each job is an mccl.distributed all_sum over numpy, so the
interpreter must be the one with numpy and the package. mccl-topo's
--backend jaccl hostfile (with MLX's "rdma" lists) is checked on planned
links without a network.

    mlx_launch_test.py

Needs root (network namespaces); otherwise it prints why and exits 77.
"""

import importlib.machinery
import importlib.util
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netns_hosts  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MCCLRUN = os.environ.get("MCCLRUN") or os.path.join(ROOT, "tools", "mcclrun")
TOPO = os.path.join(os.path.dirname(MCCLRUN), "mccl-topo")
PACKAGE = os.environ.get("MCCL_PYTHON_PACKAGE_DIR") or os.path.join(ROOT, "build", "python")
JOB_TIMEOUT = 90

SCRIPT = """\
import json, os, sys
import numpy as np
from mccl import distributed as md
g = md.init(strict=True)
total = md.all_sum(np.array([g.rank() + 1], np.int64))
hostfile = None
if os.environ.get("MLX_HOSTFILE"):
    with open(os.environ["MLX_HOSTFILE"]) as f:
        hostfile = json.load(f)
print(json.dumps({"rank": g.rank(), "size": g.size(), "sum": int(total[0]),
                  "python": sys.executable, "foo": os.environ.get("FOO"),
                  "pythonpath": os.environ.get("PYTHONPATH"),
                  "port_base": os.environ.get("MCCL_PORT_BASE"),
                  "sockets": os.environ.get("MCCL_SOCKETS_PER_PEER"),
                  "local_rank": os.environ.get("LOCAL_RANK"),
                  "hostfile": hostfile}))
"""


def rank_lines(stdout):
    out = {}
    for line in stdout.splitlines():
        prefix, _, text = line.partition(" ")
        if text.startswith("{"):
            out[int(prefix.strip("[]"))] = json.loads(text)
    return out


class LauncherForwardsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hosts = netns_hosts.EmulatedHosts(count=2).__enter__()
        cls.tmp = tempfile.TemporaryDirectory(prefix="mccl-mlx-launch-")
        cls.script = os.path.join(cls.tmp.name, "job.py")  # no exec bit, as MLX users have
        with open(cls.script, "w") as f:
            f.write(SCRIPT)

    @classmethod
    def tearDownClass(cls):
        cls.hosts.close()
        cls.tmp.cleanup()

    def mcclrun(self, *args, env=None, master=0):
        environment = {k: v for k, v in os.environ.items()
                       if k not in ("PYTHONPATH", "RANK", "WORLD_SIZE", "MLX_RANK")}
        environment.update(env or {})
        done = self.hosts.run(0, [sys.executable, MCCLRUN, "--ssh", self.hosts.ssh_command,
                                  "--timeout", str(JOB_TIMEOUT), "--cwd", self.tmp.name,
                                  "--master-addr", self.hosts.address(master), *args],
                              timeout=JOB_TIMEOUT + 30, check=False, env=environment)
        self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr[-3000:])
        return done

    def test_sshd_path_has_another_python3(self):
        # What makes the interpreter test meaningful: a bare `python3` over
        # ssh is not this interpreter.
        done = self.hosts.run(0, ["ssh", "-F", self.hosts.ssh_config, "-T", "h1",
                                  "command -v python3"], timeout=30, check=False)
        self.assertNotEqual(done.stdout.strip(), sys.executable, done.stderr)

    def test_x_forwards_values_and_the_interpreter_follows(self):
        done = self.mcclrun("--hosts", "h0,h1", "-x", "FOO", "-x", "PYTHONPATH", "job.py",
                            env={"FOO": "bar baz", "PYTHONPATH": PACKAGE})
        ranks = rank_lines(done.stdout)
        self.assertEqual(sorted(ranks), [0, 1], done.stdout + done.stderr)
        for r, out in ranks.items():
            self.assertEqual((out["size"], out["sum"]), (2, 3))
            self.assertEqual(out["foo"], "bar baz")
            self.assertEqual(out["pythonpath"], PACKAGE)
            self.assertEqual(out["python"], sys.executable)

    def test_x_of_an_unset_variable_is_an_error(self):
        done = self.hosts.run(0, [sys.executable, MCCLRUN, "--hosts", "h0,h1", "-x",
                                  "MCCL_TEST_UNSET_VARIABLE", "job.py"],
                              timeout=60, check=False)
        self.assertEqual(done.returncode, 2)
        self.assertIn("MCCL_TEST_UNSET_VARIABLE is not set", done.stderr)

    def test_four_ranks_on_one_host_and_spread_over_two(self):
        for hosts, n, per_host, master in (("h1", 4, [4], 1), ("h0,h1", 3, [2, 1], 0)):
            with self.subTest(hosts=hosts, n=n):
                done = self.mcclrun("--hosts", hosts, "-n", str(n), "-x", "PYTHONPATH", "job.py",
                                    env={"PYTHONPATH": PACKAGE}, master=master)
                ranks = rank_lines(done.stdout)
                self.assertEqual(sorted(ranks), list(range(n)), done.stdout + done.stderr)
                self.assertEqual({out["sum"] for out in ranks.values()}, {n * (n + 1) // 2})
                local = [int(ranks[r]["local_rank"]) for r in range(n)]
                self.assertEqual(local, [i for count in per_host for i in range(count)])

    def test_stated_slots_still_bound_n(self):
        done = self.hosts.run(0, [sys.executable, MCCLRUN, "--hosts", "h1:2", "-n", "4", "job.py"],
                              timeout=60, check=False)
        self.assertEqual(done.returncode, 2)
        self.assertIn("do not fit the 2 slots", done.stderr)

    def test_starting_port_and_connections_per_ip(self):
        base = 23000 + os.getpid() % 20000
        done = self.mcclrun("--hosts", "h0,h1", "--backend", "ring", "--starting-port", str(base),
                            "--connections-per-ip", "2", "-x", "PYTHONPATH", "job.py",
                            env={"PYTHONPATH": PACKAGE})
        ranks = rank_lines(done.stdout)
        self.assertEqual(sorted(ranks), [0, 1], done.stdout + done.stderr)
        for r, out in ranks.items():
            self.assertEqual((out["sum"], out["port_base"], out["sockets"]), (3, str(base), "2"))
            self.assertEqual([int(a[0].rsplit(":", 1)[1]) for a in out["hostfile"]],
                             [base, base + 1])


def load_topo():
    loader = importlib.machinery.SourceFileLoader("mccl_topo", TOPO)
    spec = importlib.util.spec_from_loader("mccl_topo", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class TopoJacclTest(unittest.TestCase):
    """The JACCL hostfile from planned links: no network needed."""

    def test_jaccl_hostfile_has_rdma_lists(self):
        topo = load_topo()
        hosts = ["a", "b", "c"]
        links = [topo.Link("a", "ea1", "b", "eb0"), topo.Link("a", "ea2", "c", "ec0"),
                 topo.Link("b", "eb2", "c", "ec1")]
        for i, link in enumerate(links):
            link.addr_a, link.addr_b = f"192.168.{i}.1/30", f"192.168.{i}.2/30"
        self.assertEqual(topo.missing_pairs(hosts, links, "jaccl"), [])
        self.assertEqual(topo.missing_pairs(hosts, links[:2], "jaccl"), [("b", "c")])
        entries = topo.hostfile_entries(hosts, links, "jaccl")
        self.assertEqual([e["rdma"] for e in entries],
                         [[None, "rdma_ea1", "rdma_ea2"], ["rdma_eb0", None, "rdma_eb2"],
                          ["rdma_ec0", "rdma_ec1", None]])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "jaccl.json")
            topo.write_hostfile(path, entries)  # reads it back as mcclrun does
            sys.path.insert(0, os.path.dirname(TOPO))
            import mccl_hosts
            self.assertTrue(mccl_hosts.read_hostfile(path).has_rdma)

    def test_verbose_is_accepted(self):
        topo = load_topo()
        opts = topo.parse_args(["--hosts", "a,b", "--backend", "jaccl", "--verbose"])
        self.assertTrue(opts.verbose)
        self.assertEqual(opts.backend, "jaccl")


if __name__ == "__main__":
    sys.exit(netns_hosts.run_tests())
