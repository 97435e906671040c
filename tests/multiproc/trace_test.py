#!/usr/bin/env python3
"""MCCL_TRACE: three ranks (real processes, loopback) run mccl_check ops
(every collective, point to point and a split) with a trace directory;
tools/mccl-trace merges the ranks' files. The merged file must be what
Perfetto reads (a traceEvents list of well-formed events), name every rank,
and hold every collective op of every communicator on every rank, with the
chunks that carried them and the engine's waits. A hard timeout ends the
run; the directory is removed afterwards.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
MCCL_CHECK = os.path.abspath(
    os.environ.get("MCCL_CHECK")
    or os.path.join(ROOT, "build", "tests", "multiproc", "mccl_check"))
WORLD = 3


class TraceTest(unittest.TestCase):
    def test_merged_trace_holds_every_op_on_every_rank(self):
        with tempfile.TemporaryDirectory(prefix="mccl-trace-test-") as tmp:
            trace_dir = os.path.join(tmp, "trace")
            # mccl refuses MCCL_* variables it does not know (MCCL_CHECK).
            env = {k: v for k, v in os.environ.items() if not k.startswith("MCCL_")}
            run = subprocess.run(
                [sys.executable, os.path.join(ROOT, "tools", "mcclrun"), "-n", str(WORLD), "--timeout", "120",
                 "--env", f"MCCL_TRACE={trace_dir}", "--", MCCL_CHECK, "ops", "1", "100003"],
                capture_output=True, text=True, timeout=150, env=env)
            self.assertEqual(run.returncode, 0, run.stdout[-3000:] + run.stderr[-3000:])
            merged = os.path.join(tmp, "job.json")
            tool = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "mccl-trace"), trace_dir,
                                   "-o", merged], capture_output=True, text=True, timeout=60)
            print(tool.stdout, file=sys.stderr)
            self.assertEqual(tool.returncode, 0, tool.stdout + tool.stderr)
            with open(merged) as f:
                doc = json.load(f)
        events = doc["traceEvents"]
        self.assertIsInstance(events, list)
        for e in events:
            self.assertIn(e["ph"], ("M", "b", "e", "i", "X"), e)
            self.assertIsInstance(e["pid"], int)
            if e["ph"] != "M":
                self.assertIsInstance(e["ts"], (int, float))
        names = {e["pid"]: e["args"]["name"] for e in events
                 if e["ph"] == "M" and e["name"] == "process_name"}
        self.assertEqual(names, {r: f"rank {r}" for r in range(WORLD)})
        # Every async op opens and closes; collective ones per (comm, seq).
        begins = [e for e in events if e["ph"] == "b"]
        ends = {(e["pid"], e["id"]) for e in events if e["ph"] == "e"}
        self.assertTrue(begins)
        seen = {}
        for b in begins:
            self.assertIn((b["pid"], b["id"]), ends, b)
            if b["args"]["collective"]:
                seen.setdefault(b["args"]["comm"], {}).setdefault(b["pid"], set()).add(b["args"]["seq"])
        for comm, per_rank in seen.items():
            every = set().union(*per_rank.values())
            for r, seqs in per_rank.items():
                self.assertEqual(seqs, every, f"comm {comm}: rank {r} lacks {sorted(every - seqs)}")
        world_comm = max(seen, key=lambda c: len(seen[c]))
        self.assertEqual(sorted(seen[world_comm]), list(range(WORLD)))
        kinds = {b["name"] for b in begins}
        for op in ("allreduce", "allgather", "reduce_scatter", "alltoall", "send", "recv"):
            self.assertIn(op, kinds)
        chunks = [e for e in events if e["ph"] == "i"]
        self.assertTrue(any(e["name"].startswith("send to ") for e in chunks))
        self.assertTrue(any(e["name"].startswith("recv from ") for e in chunks))


if __name__ == "__main__":
    unittest.main(verbosity=2)
