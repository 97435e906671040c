#!/usr/bin/env python3
"""3 emulated hosts x 2 ranks over real ssh: mcclrun --hostfile starts
mccl_check on every host; allreduce, broadcast and the other collectives
(allgather among them) must be exact over a mix of links: shared memory
between the two ranks of a host, TCP between hosts; so must the host-aware
algorithms on an uneven layout (3 + 1 + 2 ranks), and the table must pick
them for large ops.  Also the route-to-MASTER_ADDR choice
(no ips in the hosts list), the error for an MCCL_IFNAME that matches
nothing, and a job launched the way mlx.launch users do (MLX's ring
hostfile, --backend ring).

    netns_hosts_test.py MCCL_CHECK

Needs root (network namespaces); otherwise it prints why and exits 77, which
ctest reports as skipped.
"""

import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netns_hosts  # noqa: E402

MCCLRUN = os.environ.get("MCCLRUN") or os.path.join(HERE, "..", "..", "tools", "mcclrun")
MCCL_CHECK = None
PYTHON = sys.executable
JOB_TIMEOUT = 120  # mcclrun's own --timeout; the subprocess gets a bit more


class ThreeHostsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hosts = netns_hosts.EmulatedHosts(count=3, rate="1gbit").__enter__()
        cls.tmp = tempfile.mkdtemp(prefix="mccl-hostfile-")

    @classmethod
    def tearDownClass(cls):
        cls.hosts.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def mcclrun(self, *args, check_ok=True):
        done = self.hosts.run(0, [PYTHON, MCCLRUN, "--ssh", self.hosts.ssh_command,
                                  "--timeout", str(JOB_TIMEOUT), *args],
                              timeout=JOB_TIMEOUT + 30, check=False)
        if check_ok:
            self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr[-3000:])
        return done

    def hostfile(self, **kwargs):
        path = os.path.join(self.tmp, "hosts.json")
        with open(path, "w") as f:
            json.dump(self.hosts.hostfile(**kwargs), f)
        return path

    def test_collectives_over_ssh(self):
        hostfile = self.hostfile(slots=2)
        for mode, counts in (("allreduce", ["0", "1", "7", "262147", "4194304"]),
                             ("broadcast", ["0", "1", "7", "262147"]),
                             ("ops", ["0", "1", "7", "100003"])):
            with self.subTest(mode=mode):
                done = self.mcclrun("--hostfile", hostfile, "--env", "MCCL_LOG_LEVEL=INFO",
                                    "--", MCCL_CHECK, mode, *counts)
                # Every rank listened on its own host's address; the two
                # ranks of a host share memory, other hosts are over TCP.
                for rank in range(6):
                    address = self.hosts.address(rank // 2)
                    self.assertIn(f"rank {rank} listens on {address}", done.stderr)
                    buddy = rank ^ 1
                    self.assertIn(f"rank {rank}: rank {buddy} over shared memory (", done.stderr)
                    for other in range(6):
                        if other // 2 != rank // 2:
                            self.assertIn(f"rank {rank}: rank {other} over TCP (another host)", done.stderr)
                    self.assertIn(f"rank {rank}: connected to 5 peer(s) over 5 socket(s), 3 host(s); "
                                  "1 of the peers over shared memory", done.stderr)

    def test_host_aware_collectives(self):
        # Six ranks over the three hosts: ranks 0-2 on h0, 3 on h1, 4-5 on h2
        # (one rank per host carries the inter-host traffic; the others fold
        # in). Every collective, the four host-aware ones forced, and the
        # default table's choice of them for large ops logged.
        done = self.mcclrun("--hosts", "h0:3,h1:1,h2:2", "--master-addr", self.hosts.address(0),
                            "--env", "MCCL_LOG_LEVEL=INFO", "--env",
                            "MCCL_ALGO=allreduce=hier;broadcast=hier;allgather=hier;reduce_scatter=hier",
                            "--", MCCL_CHECK, "striped", "0", "1", "7", "262147")
        for rank in range(6):
            self.assertIn(f"rank {rank}: ops: 0 failure(s)", done.stdout)
            self.assertIn(f"rank {rank}: broadcast: 0 failure(s)", done.stdout)
        self.assertIn("3 host(s)", done.stderr)
        for op in ("allreduce", "broadcast", "allgather", "reduce_scatter"):
            self.assertIn(f"  {op}: ", done.stderr)
        # Without MCCL_ALGO the table takes them from a megabyte.
        done = self.mcclrun("--hostfile", self.hostfile(slots=2), "--env", "MCCL_LOG_LEVEL=INFO",
                            "--", MCCL_CHECK, "allreduce", "7", "1048583")
        for op in ("allreduce", "broadcast", "allgather", "reduce_scatter"):
            self.assertRegex(done.stderr, rf"  {op}: [^\n]*hier above \d+[KM]\b")

    def test_route_to_master_picks_the_interface(self):
        done = self.mcclrun("--hosts", "h0:2,h1:2,h2:2", "--master-addr", self.hosts.address(0),
                            "--env", "MCCL_LOG_LEVEL=INFO", "--", MCCL_CHECK, "allreduce", "7", "65537")
        for rank in range(6):
            self.assertIn(f"rank {rank} listens on {self.hosts.address(rank // 2)}: eth0 "
                          f"({self.hosts.address(rank // 2)}) routes to MASTER_ADDR", done.stderr)

    def test_mlx_ring_hostfile_and_backend(self):
        # What an mlx.launch user brings: MLX's ring hostfile (a bare list of
        # hosts without slots: one rank each) and --backend ring, which must
        # reach every remote rank as MCCL_TRANSPORT=tcp.
        path = os.path.join(self.tmp, "mlx-ring.json")
        with open(path, "w") as f:
            json.dump([{"ssh": self.hosts.name(h), "ips": [self.hosts.address(h)]}
                       for h in range(3)], f)
        done = self.mcclrun("--hostfile", path, "--backend", "ring", "--env", "MCCL_LOG_LEVEL=INFO",
                            "--", MCCL_CHECK, "allreduce", "7", "65537")
        for rank in range(3):
            self.assertIn(f"[{rank}] MCCL_TRANSPORT=tcp (environment)", done.stderr)
            self.assertIn(f"rank {rank} listens on {self.hosts.address(rank)}", done.stderr)
            self.assertIn(f"rank {rank}: connected to 2 peer(s)", done.stderr)
            self.assertRegex(done.stdout, rf"rank {rank}: allreduce: \d+ case\(s\), 0 failure\(s\)")
        self.assertNotIn("[3]", done.stdout + done.stderr)

    def test_unknown_interface_is_named(self):
        done = self.mcclrun("--hostfile", self.hostfile(slots=1, ips=False),
                            "--master-addr", self.hosts.address(0), "--env", "MCCL_IFNAME=ib", "--", MCCL_CHECK, "allreduce", "7",
                            check_ok=False)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn('MCCL_IFNAME="ib" matches no interface that is up; this host has: '
                      "lo (127.0.0.1), eth0 (10.77.0.", done.stdout + done.stderr)


TOPO = os.path.join(HERE, "..", "..", "tools", "mccl-topo")


class TwoNetworksTest(unittest.TestCase):
    """Two hosts on two networks: mccl-topo sees both, and its hostfile runs."""

    @classmethod
    def setUpClass(cls):
        cls.hosts = netns_hosts.EmulatedHosts(count=2, networks=2, rate="200mbit").__enter__()
        cls.tmp = tempfile.mkdtemp(prefix="mccl-topo-")

    @classmethod
    def tearDownClass(cls):
        cls.hosts.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def topo(self, *args):
        done = self.hosts.run(0, [PYTHON, TOPO, "--ssh", self.hosts.ssh_command,
                                  "--probe-bytes", "2M", *args, "h0", "h1"],
                              timeout=120, check=False)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

    def test_topology_and_hostfile(self):
        hostfile = os.path.join(self.tmp, "topo-hosts.json")
        report = json.loads(self.topo("--json", "--hostfile", hostfile))
        speeds = {i["name"]: i["speed_mbps"] for i in report["hosts"]["h1"]["interfaces"]}
        self.assertIn("eth1", speeds)
        reached = {(p["from"], p["address"]) for p in report["pairs"] if p["ok"]}
        self.assertEqual(reached, {("h0", "10.77.0.2"), ("h0", "10.77.1.2"),
                                   ("h1", "10.77.0.1"), ("h1", "10.77.1.1")})
        for p in report["pairs"]:
            self.assertGreater(p["gbps"], 0)
            self.assertGreater(p["rtt_us"], 0)
        with open(hostfile) as f:
            written = json.load(f)["hosts"]
        self.assertEqual([(h["ssh"], h["ips"]) for h in written],
                         [("h0", ["10.77.0.1", "10.77.1.1"]), ("h1", ["10.77.0.2", "10.77.1.2"])])
        # The hostfile it wrote runs a job (both addresses of each host in use).
        done = self.hosts.run(0, [PYTHON, MCCLRUN, "--ssh", self.hosts.ssh_command,
                                  "--timeout", str(JOB_TIMEOUT), "--hostfile", hostfile,
                                  "--", MCCL_CHECK, "allreduce", "1", "65537", "1048583"],
                              timeout=JOB_TIMEOUT + 30, check=False)
        self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr[-3000:])

    def tx_bytes(self, host, dev):
        done = self.hosts.run(host, ["cat", f"/sys/class/net/{dev}/statistics/tx_bytes"], timeout=10)
        return int(done.stdout)

    def test_two_addresses_stripe_over_both_networks(self):
        # Both addresses of every host in the hostfile: with the default
        # MCCL_SOCKETS_PER_PEER (auto) every pair opens one socket per
        # address, so both shaped networks carry the job's bytes.
        before = [(self.tx_bytes(h, "eth0"), self.tx_bytes(h, "eth1")) for h in range(2)]
        done = self.hosts.run(0, [PYTHON, MCCLRUN, "--ssh", self.hosts.ssh_command,
                                  "--timeout", str(JOB_TIMEOUT), "--hostfile", self.hostfile(),
                                  "--env", "MCCL_LOG_LEVEL=INFO",
                                  "--", MCCL_CHECK, "striped", "0", "7", "262147", "1048583"],
                              timeout=JOB_TIMEOUT + 30, check=False)
        report = done.stdout[-3000:] + done.stderr[-3000:]
        self.assertEqual(done.returncode, 0, report)
        for rank in range(2):
            self.assertIn(f"rank {rank}: connected to 1 peer(s) over 2 socket(s)", done.stderr)
            self.assertRegex(done.stdout, rf"rank {rank}: inline: [1-9]\d* of")
        # Each 1048583-element float allreduce alone sends about 4 MB each
        # way; both links of both hosts must have carried a good share.
        for h in range(2):
            sent = [after - was for after, was in zip((self.tx_bytes(h, "eth0"), self.tx_bytes(h, "eth1")),
                                                      before[h])]
            for dev, n in zip(("eth0", "eth1"), sent):
                self.assertGreater(n, 8 << 20, f"h{h} {dev} sent only {n} bytes: {sent}\n{report}")

    def hostfile(self):
        path = os.path.join(self.tmp, "two-networks.json")
        with open(path, "w") as f:
            json.dump(self.hosts.hostfile(slots=1), f)
        return path

    def test_dot(self):
        dot = self.topo("--dot")
        self.assertTrue(dot.startswith("digraph mccl_topology {"), dot)
        self.assertIn('"h0" -> "h1" [label="eth1 ', dot)
        self.assertIn('"h1" -> "h0" [label="eth0 ', dot)


def main():
    global MCCL_CHECK
    if len(sys.argv) < 2:
        print("usage: netns_hosts_test.py MCCL_CHECK [unittest args]", file=sys.stderr)
        return 2
    MCCL_CHECK = os.path.abspath(sys.argv.pop(1))
    return netns_hosts.run_tests()


if __name__ == "__main__":
    sys.exit(main())
