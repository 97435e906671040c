#!/usr/bin/env python3
"""A ring of cables with no chord, as MLX's Thunderbolt rings of Macs are:
4 hosts (h0-h1-h2-h3-h0) over real ssh between network namespaces.
mccl-topo --backend ring --auto-setup routes the non-neighbours (h0-h2,
h1-h3) through a neighbour and turns forwarding on there, verifies every
pair, and an mcclrun --hostfile --backend ring job of 4 ranks (an
mccl.distributed all_sum, and all_gather, over numpy) runs over the
hostfile written. Running --auto-setup again changes nothing.

    topo_ring_test.py

Needs root (network namespaces); otherwise it prints why and exits 77.
"""

import json
import os
import shutil
import signal
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netns_hosts  # noqa: E402
from topo_test import TCP_REACH, lay_cables  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MCCLRUN = os.environ.get("MCCLRUN") or os.path.join(ROOT, "tools", "mcclrun")
TOPO = os.path.join(os.path.dirname(MCCLRUN), "mccl-topo")
PACKAGE = os.environ.get("MCCL_PYTHON_PACKAGE_DIR") or os.path.join(ROOT, "build", "python")
HOSTS = 4
CABLES = [(i, (i + 1) % HOSTS) for i in range(HOSTS)]
ALL = ",".join(f"h{i}" for i in range(HOSTS))

JOB = """\
import json, numpy as np
from mccl import distributed as md
g = md.init(strict=True)
total = md.all_sum(np.full(100003, g.rank() + 1, np.float32))
rows = md.all_gather(np.array([g.rank()], np.int64))
print(json.dumps({"rank": g.rank(), "size": g.size(), "sum": float(total[0]),
                  "same": bool((total == total[0]).all()), "rows": rows.tolist()}))
"""


class RingOfFourTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hosts = netns_hosts.EmulatedHosts(count=HOSTS).__enter__()
        cls.tmp = tempfile.mkdtemp(prefix="mccl-topo-ring-")
        signal.signal(signal.SIGTERM, cls.on_sigterm)
        try:
            lay_cables(cls.hosts, CABLES)
            # The management switch (eth0, what ssh uses) must not carry the
            # job: the hostfile's addresses are on the cables only.
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def on_sigterm(cls, signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        cls.tearDownClass()
        os._exit(128 + signum)

    @classmethod
    def tearDownClass(cls):
        cls.hosts.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def topo(self, *args):
        done = self.hosts.run(0, [sys.executable, TOPO, "--ssh", self.hosts.ssh_command,
                                  "--timeout", "20", *args], timeout=120, check=False)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        return done

    def network_state(self):
        return [(self.hosts.run(h, ["ip", "-4", "addr", "show"], timeout=10).stdout,
                 self.hosts.run(h, ["ip", "route", "show"], timeout=10).stdout,
                 self.hosts.run(h, ["sysctl", "-n", "net.ipv4.ip_forward"], timeout=10).stdout)
                for h in range(HOSTS)]

    def test_1_setup_routes_the_non_neighbours(self):
        path = os.path.join(self.tmp, "ring.json")
        done = self.topo("--hosts", ALL, "--backend", "ring", "--auto-setup", "--verbose",
                         "--output", path)
        self.assertIn("route h0 <-> h2: through h1", done.stdout)
        self.assertRegex(done.stdout, r"route h1 <-> h3: through h[02] ")
        self.assertIn("verified:", done.stdout)
        self.assertIn("sysctl -q -w net.ipv4.ip_forward=1", done.stdout)
        # --verbose: the far pairs were pinged, not only the neighbours.
        self.assertRegex(done.stderr, r"h0 -> h2 at [\d.]+: answers")
        self.assertRegex(done.stderr, r"h3 -> h1 at [\d.]+: answers")
        with open(path) as f:
            ips = [e["ips"] for e in json.load(f)]
        # Every host reaches every other's hostfile address over TCP.
        for src in range(HOSTS):
            for dst in range(HOSTS):
                if src != dst:
                    for addr in ips[dst]:
                        reach = self.hosts.run(src, [sys.executable, "-c", TCP_REACH, addr],
                                               timeout=10, check=False)
                        self.assertEqual(reach.returncode, 0, f"h{src} -> h{dst} {addr}: "
                                                              f"{reach.stderr}")

    def test_2_job_over_the_ring_hostfile(self):
        path = os.path.join(self.tmp, "ring.json")
        script = os.path.join(self.tmp, "job.py")
        with open(script, "w") as f:
            f.write(JOB)
        env = dict(os.environ, PYTHONPATH=PACKAGE)
        done = self.hosts.run(0, [sys.executable, MCCLRUN, "--ssh", self.hosts.ssh_command,
                                  "--timeout", "90", "--hostfile", path, "--backend", "ring",
                                  "-x", "PYTHONPATH", "--cwd", self.tmp, "job.py"],
                              timeout=120, check=False, env=env)
        self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr[-3000:])
        outs = [json.loads(line.partition(" ")[2]) for line in done.stdout.splitlines()]
        self.assertEqual(sorted(o["rank"] for o in outs), list(range(HOSTS)))
        for o in outs:
            self.assertEqual((o["size"], o["sum"], o["same"], o["rows"]),
                             (HOSTS, 10.0, True, list(range(HOSTS))))

    def test_3_again_changes_nothing(self):
        before = self.network_state()
        done = self.topo("--hosts", ALL, "--backend", "ring", "--auto-setup",
                         "--output", os.path.join(self.tmp, "again.json"))
        self.assertIn("setup: nothing to do", done.stdout)
        self.assertIn("verified:", done.stdout)
        self.assertEqual(self.network_state(), before)


def main():
    return netns_hosts.run_tests()


if __name__ == "__main__":
    sys.exit(main())
