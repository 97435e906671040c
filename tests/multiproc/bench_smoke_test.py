#!/usr/bin/env python3
"""Smoke test of mccl-bench's --json output for one op.

    bench_smoke_test.py MCCLRUN MCCL_BENCH OP EXPECTED_ROWS

Runs `mcclrun -n 2 --timeout 120 -- mccl-bench -o OP -b 4 -e 64K -f 16 -n 3
--json -` and checks that it exits 0, that every line rank 0 wrote to stdout
is a JSON object with exactly the documented keys, that there is one per size
(EXPECTED_ROWS), and that every size's check is "ok" ("skipped" for barrier,
which has no data to compare). Timings are not asserted.
"""

import json
import re
import subprocess
import sys

KEYS = ["library", "variant", "op", "dtype", "redop", "ranks", "bytes", "count", "p50_us",
        "p99_us", "algbw_gbs", "busbw_gbs", "check", "algorithm", "inline_pct",
        "op_thread_pct", "actor_messages_per_op", "thread_wakeups_per_op", "link_turns_per_op",
        "link_chunks_per_op", "batch", "inflight"]
PREFIX = re.compile(r"^\[(\d+)\] ?(.*)$")


def fail(why, out=""):
    print(f"bench_smoke_test: {why}", file=sys.stderr)
    if out:
        print(out, file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 5:
        fail("usage: bench_smoke_test.py MCCLRUN MCCL_BENCH OP EXPECTED_ROWS")
    mcclrun, bench, op, expected_rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    cmd = [sys.executable, mcclrun, "-n", "2", "--timeout", "120", "--", bench, "-o", op,
           "-b", "4", "-e", "64K", "-f", "16", "-n", "3", "--json", "-"]
    print("running:", " ".join(cmd))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=180)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        fail(f"exit status {proc.returncode}", out)
    rows = []
    for line in proc.stdout.splitlines():
        m = PREFIX.match(line)
        if not m:
            fail(f"stdout line without a rank prefix: {line!r}", out)
        rank, text = int(m.group(1)), m.group(2)
        if rank != 0:
            fail(f"rank {rank} wrote to stdout: {text!r}", out)
        try:
            row = json.loads(text)
        except json.JSONDecodeError as err:
            fail(f"not JSON ({err}): {text!r}", out)
        if not isinstance(row, dict) or list(row) != KEYS:
            fail(f"keys {list(row) if isinstance(row, dict) else row!r}, expected {KEYS}", out)
        want_check = "skipped" if op == "barrier" else "ok"
        if row["check"] != want_check:
            fail(f"check is {row['check']!r}, expected {want_check!r}: {text}", out)
        if row["library"] != "mccl" or row["op"] != op or row["ranks"] != 2:
            fail(f"unexpected library/op/ranks: {text}", out)
        for key in ("bytes", "count"):
            if not isinstance(row[key], int) or row[key] < 0:
                fail(f"{key} is not a count: {text}", out)
        for key in ("p50_us", "p99_us", "algbw_gbs", "busbw_gbs"):
            if not isinstance(row[key], (int, float)):
                fail(f"{key} is not a number: {text}", out)
        if not row["algorithm"]:
            fail(f"no algorithm: {text}", out)
        for key in ("inline_pct", "op_thread_pct"):
            if not isinstance(row[key], int) or not 0 <= row[key] <= 100:
                fail(f"{key} is not a percentage: {text}", out)
        if row["inline_pct"] + row["op_thread_pct"] > 100:
            fail(f"inline_pct + op_thread_pct above 100: {text}", out)
        for key in ("actor_messages_per_op", "thread_wakeups_per_op", "link_turns_per_op", "link_chunks_per_op"):
            if not isinstance(row[key], (int, float)) or row[key] < 0:
                fail(f"{key} is not a count per op: {text}", out)
        rows.append(row)
    if len(rows) != expected_rows:
        fail(f"{len(rows)} JSON lines, expected {expected_rows}", out)
    sizes = [r["bytes"] for r in rows]
    if sizes != sorted(set(sizes)):
        fail(f"sizes not strictly increasing: {sizes}", out)
    print(f"{len(rows)} rows, all {rows[0]['check']}")


if __name__ == "__main__":
    main()
