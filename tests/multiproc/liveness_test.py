#!/usr/bin/env python3
"""A live, working rank is never declared dead (real processes, loopback).

Four ranks run 16 MiB allreduces back to back with no compute in between,
for LIVENESS_SECONDS (default 45). The built-in table picks Rabenseifner
there, which never pairs ranks 0-3 and 1-2: those pairs exchange no data
for the whole run, so only heartbeats on idle directions keep them alive.
The liveness limit is shortened (MCCL_HEARTBEAT_MS=300 x
MCCL_HEARTBEAT_MISSES=5: 1.5 s) so that a rank going silent would be
declared dead many times over within the run. Every rank must finish every
op, exact, and say it is alive at the end; no rank may print "declared
dead".

Each rank is started directly (its own process group) with a hard timeout;
every process is killed on the way out, whatever happened. Set MCCL_CHECK to
the mccl_check binary; by default the one in ../../build is used.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MCCL_CHECK = os.path.abspath(
    os.environ.get("MCCL_CHECK")
    or os.path.join(HERE, "..", "..", "build", "tests", "multiproc", "mccl_check"))
WORLD = 4
SECONDS = int(os.environ.get("LIVENESS_SECONDS", "45"))
COUNT = 4 * 1024 * 1024  # float32: 16 MiB
# Startup, the loop, then finalize; far above what it takes.
HARD_TIMEOUT = SECONDS + 40


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LivenessTest(unittest.TestCase):
    def test_four_ranks_of_large_allreduces_stay_alive(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCCL_")}
        env.update(WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                   MCCL_HEARTBEAT_MS="300", MCCL_HEARTBEAT_MISSES="5")
        procs, logs = [], []
        with tempfile.TemporaryDirectory() as tmp:
            try:
                for r in range(WORLD):
                    out = open(os.path.join(tmp, f"rank{r}.log"), "w+")
                    logs.append(out)
                    procs.append(subprocess.Popen(
                        [MCCL_CHECK, "liveness", str(SECONDS), str(COUNT)], env=dict(env, RANK=str(r)),
                        stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                        start_new_session=True))
                deadline = time.monotonic() + HARD_TIMEOUT
                for p in procs:
                    try:
                        p.wait(timeout=max(0.1, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        pass
            finally:
                for p in procs:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
                        p.wait()
            texts = []
            for out in logs:
                out.seek(0)
                texts.append(out.read())
                out.close()
        for r, (p, text) in enumerate(zip(procs, texts)):
            tail = "\n".join(text.splitlines()[-15:])
            print(f"  rank {r}: exit {p.returncode}: "
                  + next((l for l in text.splitlines() if "liveness:" in l or "failed" in l), "(no summary)"),
                  file=sys.stderr)
            self.assertNotIn("declared dead", text, f"rank {r} declared a live rank dead:\n{tail}")
            self.assertEqual(p.returncode, 0, f"rank {r} did not finish alive:\n{tail}")
            self.assertIn("every rank alive", text, tail)
            ops = int(text.split("liveness: ")[1].split(" ")[0])
            self.assertGreaterEqual(ops, 10, f"rank {r} ran only {ops} allreduce(s): too few to mean anything")


if __name__ == "__main__":
    unittest.main(verbosity=2)
