#!/usr/bin/env python3
"""Where the time of small allreduces goes, from the MCCL_TRACE files of
every rank of one host (mccl-bench runs a barrier before each allreduce).

    MCCL_TRACE=/tmp/tr MCCL_TRANSPORT=tcp tools/mcclrun -n 16 -- \\
        build/bench/mccl-bench -b 4 -e 4 -n 2000 -w 200
    python3 bench/latency_16/trace_stats.py /tmp/tr

Prints p10/p50/p90 (µs) over the allreduces (the first fifth left out) of:
the spread of their start times over the ranks (how unevenly the barrier
let them go), each rank's time from start to its first send, each step's
time from a send to the peer's receipt of it ("transit"), from a receipt to
the next step's send, and the op's span over all ranks. Timestamps are
those of the trace (wall clock, 0.25 µs or better on one host).
"""
import collections
import glob
import json
import sys


def load(folder):
    ops = {}    # (rank, seq) -> (start, end, name)
    sends = {}  # (rank, seq, step, peer) -> time
    recvs = {}
    for path in glob.glob(folder + "/mccl-trace.rank*.json"):
        doc = json.load(open(path))
        rank = doc["otherData"]["rank"]
        begun = {}
        for e in doc["traceEvents"]:
            ph = e.get("ph")
            if ph == "b":
                begun[e["id"]] = (e["ts"], e["name"], e["args"]["seq"])
            elif ph == "e":
                start, name, seq = begun.pop(e["id"])
                ops[(rank, seq)] = (start, e["ts"], name)
            elif ph == "i":
                a = e["args"]
                where = sends if e["name"].startswith("send") else recvs
                where[(rank, a["seq"], a["step"], a["peer"])] = e["ts"]
    return ops, sends, recvs


def main():
    ops, sends, recvs = load(sys.argv[1])
    ranks = sorted({r for r, _ in ops})
    seqs = sorted({s for (r, s), v in ops.items() if v[2] == "allreduce"})
    seqs = set(seqs[len(seqs) // 5:])
    m = collections.defaultdict(list)
    for s in sorted(seqs):
        if any((r, s) not in ops for r in ranks):
            continue
        starts = [ops[(r, s)][0] for r in ranks]
        ends = [ops[(r, s)][1] for r in ranks]
        m["start spread over the ranks"].append(max(starts) - min(starts))
        m["span (last end - first start)"].append(max(ends) - min(starts))
    first_send = {}
    send_at = collections.defaultdict(dict)
    for (r, s, step, peer), t in sends.items():
        if s not in seqs:
            continue
        send_at[(r, s)][step] = t
        first_send[(r, s)] = min(first_send.get((r, s), t), t)
        received = recvs.get((peer, s, step, r))
        if received is not None:
            m["transit, step %d" % step].append(received - t)
    for (r, s), t in first_send.items():
        m["start -> first send"].append(t - ops[(r, s)][0])
    for (r, s, step, peer), t in recvs.items():
        if s not in seqs:
            continue
        following = send_at[(r, s)].get(step + 1)
        if following is not None:
            m["receipt of step %d -> send of step %d" % (step, step + 1)].append(following - t)
        m["receipt of step %d -> op end" % step].append(ops[(r, s)][1] - t)
    for k in sorted(m):
        v = sorted(m[k])
        print("%-40s n=%6d p10 %7.2f p50 %7.2f p90 %7.2f" % (k, len(v), v[len(v) // 10], v[len(v) // 2],
                                                              v[len(v) * 9 // 10]))


if __name__ == "__main__":
    main()
