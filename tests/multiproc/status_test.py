#!/usr/bin/env python3
"""Observability of a running job (real processes, loopback): every rank
serves /metrics (Prometheus text) and /status on MCCL_METRICS_PORT + rank,
and tools/mcclstatus names the rank that holds the others up.

Four ranks run mccl_check late-rank: rank 1 sleeps before each of two
allreduces (a small one on the host's shared-memory board, then a 1 MiB one
through the engine). While it sleeps, mcclstatus must say that rank 1 has
not issued the op ranks 0, 2 and 3 are in; during the second, also that
they wait on it. Then rank 3 is stopped (SIGSTOP): mcclstatus must say it
does not answer. Every process is killed on the way out, whatever happened.
"""

import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
MCCL_CHECK = os.path.abspath(
    os.environ.get("MCCL_CHECK")
    or os.path.join(ROOT, "build", "tests", "multiproc", "mccl_check"))
MCCLSTATUS = os.path.join(ROOT, "tools", "mcclstatus")
WORLD = 4
SLEEP_MS = 6000
HARD_TIMEOUT = 60


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ephemeral_ports():
    """The kernel's range for port-0 binds and outgoing connections."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port_range(n):
    """A base port with base..base+n-1 all free right now, chosen at random
    below the ephemeral range: a port the kernel hands to another test's
    listener or connection between this check and the ranks' own bind would
    make a rank fail to serve (MCCL_METRICS_PORT: cannot serve metrics)."""
    low, high = ephemeral_ports()
    if low - n > 10000:
        bases = (10000, low - n)
    elif high + 1 < 65535 - n:
        bases = (high + 1, 65535 - n)
    else:
        bases = (1024, 65535 - n)
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        base = rng.randrange(*bases)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free range of ports")


def status(port):
    done = subprocess.run([sys.executable, MCCLSTATUS, "--port", str(port), "-n", str(WORLD),
                           "--timeout", "2"], capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout + done.stderr


def print_rank_logs(folder):
    """What each rank printed: why a rank did not answer is in its log."""
    for r in range(WORLD):
        with open(os.path.join(folder, f"rank{r}.log"), errors="replace") as f:
            print(f"--- rank {r} log:\n{f.read()[-4000:]}", file=sys.stderr)


class StatusTest(unittest.TestCase):
    def test_status_names_the_late_rank_and_a_stopped_one(self):
        port = free_port_range(WORLD)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCCL_")}
        # The late rank's op over the links, whose waits name the peer (on
        # the host board's stage a rank waits for every rank alike).
        env.update(WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                   MCCL_METRICS_PORT=str(port), MCCL_SHM_STAGE_BYTES="0")
        procs = []
        with tempfile.TemporaryDirectory() as tmp:
            try:
                for r in range(WORLD):
                    with open(os.path.join(tmp, f"rank{r}.log"), "w") as out:
                        procs.append(subprocess.Popen(
                            [MCCL_CHECK, "late-rank", str(SLEEP_MS)], env=dict(env, RANK=str(r)),
                            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True))
                start = time.monotonic()
                # First sleep: the others are in seq 0 on the board.
                time.sleep(3)
                rc, first = status(port)
                print(first, file=sys.stderr)
                self.assertEqual(rc, 1, first)
                self.assertIn("rank(s) 1 have not issued seq 0", first)
                self.assertIn("seq 0 [board]", first)
                # Second sleep: seq 1, 1 MiB, through the engine.
                time.sleep(max(0, start + SLEEP_MS / 1000 + 3 - time.monotonic()))
                rc, second = status(port)
                print(second, file=sys.stderr)
                self.assertEqual(rc, 1, second)
                self.assertIn("rank(s) 1 have not issued seq 1", second)
                self.assertRegex(second, r"rank 1 is waited on by rank\(s\) [0-9, ]+")
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    metrics = r.read().decode()
                self.assertIn('mccl_ops_total{rank="0",op="allreduce"} 1', metrics)
                self.assertIn("# TYPE mccl_link_bytes_sent_total counter", metrics)
                self.assertRegex(metrics, r'mccl_link_bytes_sent_total\{rank="0",comm="\d+",peer="1"\} \d+')
                # A stopped rank does not answer.
                os.kill(procs[3].pid, signal.SIGSTOP)
                rc, third = status(port)
                print(third, file=sys.stderr)
                os.kill(procs[3].pid, signal.SIGCONT)
                self.assertEqual(rc, 1, third)
                self.assertIn("not answering: rank(s) 3", third)
                deadline = start + HARD_TIMEOUT
                for p in procs:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                    self.assertEqual(p.returncode, 0)
            except BaseException:
                print_rank_logs(tmp)
                raise
            finally:
                for p in procs:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
                        p.wait()


if __name__ == "__main__":
    unittest.main(verbosity=2)
