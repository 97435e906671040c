#!/usr/bin/env python3
"""mccl-topo --hosts over real ssh between network namespaces: four hosts on
a management switch (eth0, what ssh uses) and five cables (veth pairs, down
and without addresses, as if just plugged in): the ring h0-h1-h2-h3-h0 and
the chord h0-h2.

  - --backend ring --auto-setup --output: every cable gets its own /30, the
    hostfile is MLX's [{"ssh", "ips"}] with each host's address on the cable
    from its predecessor, and the neighbours reach those addresses;
  - the same again changes nothing;
  - --backend mesh fails and names the one missing pair (h1 and h3), and
    h1 and h3 alone have no link: their eth0s see more than one neighbour;
  - --dot draws every cable and no edge for the shared eth0 network;
  - --over thunderbolt names every host as lacking such interfaces;
  - a ring of three (h0 h1 h2) runs an mccl job over the hostfile written.

    topo_test.py [MCCL_CHECK] [unittest args]

The steps share the hosts' state and run in order (test_1_..., test_2_...).
Needs root (network namespaces); otherwise it prints why and exits 77, which
ctest reports as skipped.
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

ROOT = os.path.join(HERE, "..", "..")
TOPO = os.path.join(ROOT, "tools", "mccl-topo")
MCCLRUN = os.environ.get("MCCLRUN") or os.path.join(ROOT, "tools", "mcclrun")
MCCL_CHECK = os.path.join(ROOT, "build", "tests", "multiproc", "mccl_check")
PYTHON = sys.executable
CABLES = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]  # cable k joins h<a> and h<b>
ALL = "h0,h1,h2,h3"

# Reachability as a TCP connection sees it, not by ICMP like mccl-topo: a
# refused connection to a closed port proves the address answered.
TCP_REACH = """
import socket, sys
s = socket.socket()
s.settimeout(3)
try:
    s.connect((sys.argv[1], 9))
except ConnectionRefusedError:
    sys.exit(0)
except OSError as err:
    sys.exit(f"{sys.argv[1]}: {err}")
"""


def end_name(cable, side):
    """Interface names say nothing of the far end: mccl-topo must find it."""
    return f"lnk{cable}{'ab'[side]}"


def lay_cables(hosts, cables):
    """A veth "cable" k between hosts a and b for each (a, b) of `cables`:
    made inside host a's namespace, the other end straight in b's, the ends
    named by end_name(k, side)."""
    for k, (a, b) in enumerate(cables):
        netns_hosts.sh("ip", "-n", hosts.namespace(a), "link", "add", end_name(k, 0),
                       "type", "veth", "peer", "name", end_name(k, 1),
                       "netns", hosts.namespace(b))


class CablesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hosts = netns_hosts.EmulatedHosts(count=4).__enter__()
        cls.tmp = tempfile.mkdtemp(prefix="mccl-topo-cables-")
        # unittest records the SystemExit that EmulatedHosts raises on SIGTERM
        # as one test's error and runs the rest against removed hosts: stop
        # the whole run instead, once everything is cleaned up.
        signal.signal(signal.SIGTERM, cls.on_sigterm)
        try:
            lay_cables(cls.hosts, CABLES)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def on_sigterm(cls, signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the cleanup
        cls.tearDownClass()
        print("terminated: emulated hosts removed", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    @classmethod
    def tearDownClass(cls):
        cls.hosts.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # -- helpers -------------------------------------------------------------

    def topo(self, *args):
        return self.hosts.run(0, [PYTHON, TOPO, "--ssh", self.hosts.ssh_command,
                                  "--timeout", "20", *args], timeout=90, check=False)

    def topo_ok(self, *args):
        done = self.topo(*args)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        return done

    def inet(self, host, dev):
        """The IPv4 "address/prefix"es on host's dev."""
        done = self.hosts.run(host, ["ip", "-j", "addr", "show", "dev", dev], timeout=10)
        return [f"{a['local']}/{a['prefixlen']}" for link in json.loads(done.stdout)
                for a in link.get("addr_info", []) if a["family"] == "inet"]

    def network_state(self):
        """Every host's addresses and routes, to compare before and after."""
        return [(self.hosts.run(h, ["ip", "-4", "addr", "show"], timeout=10).stdout,
                 self.hosts.run(h, ["ip", "route", "show"], timeout=10).stdout)
                for h in range(self.hosts.count)]

    def assert_reaches(self, src, addr):
        done = self.hosts.run(src, [PYTHON, "-c", TCP_REACH, addr], timeout=10, check=False)
        self.assertEqual(done.returncode, 0, f"h{src} cannot reach {addr}: {done.stderr}")

    def cable_between(self, x, y):
        return next(k for k, pair in enumerate(CABLES) if set(pair) == {x, y})

    def address_on(self, host, cable):
        side = CABLES[cable].index(host)
        addrs = self.inet(host, end_name(cable, side))
        self.assertEqual(len(addrs), 1, f"h{host} {end_name(cable, side)}: {addrs}")
        return addrs[0]

    def read_hostfile(self, path):
        with open(path) as f:
            return json.load(f)

    # -- steps, in order -----------------------------------------------------

    def test_1_ring_auto_setup(self):
        path = os.path.join(self.tmp, "ring.json")
        done = self.topo_ok("--hosts", ALL, "--backend", "ring", "--auto-setup", "--output", path)
        self.assertIn("5 link(s) between h0, h1, h2, h3", done.stdout)
        self.assertIn("verified:", done.stdout)
        # Every cable: one /30 shared by its two ends, none shared with another cable.
        networks = set()
        for k in range(len(CABLES)):
            a, b = (self.address_on(h, k) for h in CABLES[k])
            net_a, net_b = a.split(".")[:3] + [a.split("/")[1]], b.split(".")[:3] + [b.split("/")[1]]
            self.assertEqual(net_a, net_b, f"cable {k}: {a} and {b}")
            self.assertTrue(a.endswith("/30") and a != b, f"cable {k}: {a} and {b}")
            networks.add(tuple(net_a))
        self.assertEqual(len(networks), len(CABLES), networks)
        # MLX's ring hostfile: a host's address on the cable from its predecessor.
        written = self.read_hostfile(path)
        self.assertEqual([sorted(e) for e in written], [["ips", "ssh"]] * 4, written)
        self.assertEqual([e["ssh"] for e in written], ["h0", "h1", "h2", "h3"])
        for i, entry in enumerate(written):
            pred, succ = (i - 1) % 4, (i + 1) % 4
            expected = self.address_on(i, self.cable_between(pred, i)).split("/")[0]
            self.assertEqual(entry["ips"], [expected], f"h{i}")
            for neighbour in (pred, succ):
                self.assert_reaches(neighbour, expected)

    def test_2_auto_setup_again_changes_nothing(self):
        path = os.path.join(self.tmp, "ring.json")
        before, first = self.network_state(), self.read_hostfile(path)
        done = self.topo_ok("--hosts", ALL, "--backend", "ring", "--auto-setup", "--output", path)
        self.assertIn("setup: nothing to do", done.stdout)
        self.assertIn("verified:", done.stdout)
        self.assertEqual(self.network_state(), before)
        self.assertEqual(self.read_hostfile(path), first)

    def test_3_mesh_names_the_missing_pair(self):
        done = self.topo("--hosts", ALL, "--backend", "mesh")
        self.assertEqual(done.returncode, 3, done.stdout + done.stderr)
        self.assertIn("lacks a link between h1 and h3 (5 link(s) found", done.stderr)
        self.assertNotIn("h0 and h2", done.stderr)  # the chord is a cable
        # h1 and h3 share only the switch, where h0 and h2 answer too: no cable.
        done = self.topo("--hosts", "h1,h3")
        self.assertEqual(done.returncode, 3, done.stdout + done.stderr)
        self.assertIn("lacks a link between h1 and h3 (0 link(s) found", done.stderr)

    def test_4_dot_names_every_cable(self):
        dot = self.topo_ok("--hosts", ALL, "--dot").stdout
        self.assertTrue(dot.startswith("graph mccl_links {"), dot)
        for k, (a, b) in enumerate(CABLES):
            first, second = sorted(((a, 0), (b, 1)))
            self.assertIn(f'"h{first[0]}" -- "h{second[0]}" [label="{end_name(k, first[1])} - '
                          f'{end_name(k, second[1])}', dot)
        self.assertEqual(dot.count(" -- "), len(CABLES), dot)
        for h in range(4):  # the management switch is seen, and is not a cable
            self.assertIn(f"// h{h} eth0: a shared network, not a cable", dot)

    def test_5_no_thunderbolt_names_every_host(self):
        done = self.topo("--hosts", ALL, "--over", "thunderbolt")
        self.assertEqual(done.returncode, 3, done.stdout + done.stderr)
        for h in range(4):
            self.assertIn(f"mccl-topo: h{h}: no thunderbolt interfaces (it has: lo, eth0",
                          done.stderr)

    def test_6_job_over_ring_of_three(self):
        if not os.access(MCCL_CHECK, os.X_OK):
            self.skipTest(f"{MCCL_CHECK} is not built")
        path = os.path.join(self.tmp, "three.json")
        self.topo_ok("--hosts", "h0,h1,h2", "--backend", "ring", "--auto-setup", "--output", path)
        ips = [e["ips"][0] for e in self.read_hostfile(path)]
        # h0's predecessor in this ring is h2: the chord's address.
        self.assertEqual(ips[0], self.address_on(0, self.cable_between(2, 0)).split("/")[0])
        done = self.hosts.run(0, [PYTHON, MCCLRUN, "--ssh", self.hosts.ssh_command,
                                  "--timeout", "60", "--hostfile", path,
                                  "--env", "MCCL_LOG_LEVEL=INFO",
                                  "--", MCCL_CHECK, "allreduce", "7", "65537"],
                              timeout=90, check=False)
        self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr[-3000:])
        for rank, addr in enumerate(ips):
            self.assertIn(f"rank {rank} listens on {addr}", done.stderr)


def main():
    global MCCL_CHECK
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        MCCL_CHECK = os.path.abspath(sys.argv.pop(1))
    return netns_hosts.run_tests()


if __name__ == "__main__":
    sys.exit(main())
