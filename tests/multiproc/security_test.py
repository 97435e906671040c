#!/usr/bin/env python3
"""Strangers knocking while a job runs, across real processes.

A 3-rank job starts with ranks 0 and 1 only, so both sit in their accept
loops waiting for rank 2. This test then reads rank 1's endpoint and the job
token from the rendezvous store (the way rank 2 would) and dials the ranks
with every kind of bad handshake: wrong token, wrong protocol version, a
duplicate rank, a rank outside the world, another communicator, bytes that
are not mccl at all, an oversized length and a connection that says nothing.
Each one must be answered with a refusal naming what was wrong (or simply
closed), logged by the rank, and must not disturb the job: once rank 2
starts, every rank runs its collectives with every element checked and exits
0. While the collectives run, a stray also sends garbage to the rendezvous
store, which drops it and carries on.

Set MCCL_CHECK to the mccl_check binary (the ctest entry does).
"""

import os
import socket
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from faults_test import MCCL_CHECK, STARTUP_TIMEOUT, Rank, free_port, stop_ranks  # noqa: E402

MAGIC, VERSION = 0x4C43434D, 2
HELLO, REFUSE = 1, 3
HEADER = struct.Struct("<IBBHIIQIIIIQII")  # transport/wire/frame.hpp, 56 bytes
JOB_TIMEOUT = 120.0


def frame(kind, payload=b"", version=VERSION, comm=0, length=None):
    return HEADER.pack(MAGIC, version, kind, 0, comm, 0, 0, 0, 0,
                       len(payload) if length is None else length, 0, 0, 0, 0) + payload


def hello(src, dst, world, token):
    t = token.encode()
    return struct.pack("<IIIH", src, dst, world, len(t)) + t


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


class StoreClient:
    """The rendezvous store's wire (transport/store/tcp_store.hpp), read side."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5.0)

    def get(self, key, timeout):
        deadline = time.monotonic() + timeout
        k = key.encode()
        while True:
            self.sock.sendall(struct.pack("<BI", 2, len(k)) + k + struct.pack("<I", 0))
            status, length = struct.unpack("<BI", recv_exact(self.sock, 5))
            value = recv_exact(self.sock, length)
            if status == 0:
                return value.decode()
            if time.monotonic() > deadline:
                raise AssertionError(f"store key {key} not published within {timeout} s")
            time.sleep(0.05)

    def close(self):
        self.sock.close()


def connect_store(port, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return StoreClient(port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def knock(endpoint, data, read_reply=True):
    """Sends `data` to endpoint; returns the refusal text, or None when the
    rank closed the connection without one."""
    host, port = endpoint.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10.0) as s:
        if data:
            s.sendall(data)
        if not read_reply:
            return None
        head = recv_exact(s, HEADER.size)
        if len(head) < HEADER.size:
            return None
        fields = HEADER.unpack(head)
        kind, length = fields[2], fields[9]
        if kind != REFUSE:
            raise AssertionError(f"expected a refuse frame, got kind {kind}")
        return recv_exact(s, length).decode()


class SecurityTest(unittest.TestCase):
    def setUp(self):
        self.ranks = []
        self.addCleanup(self.close_all)

    def close_all(self):
        stop_ranks(self.ranks)

    def test_strays_are_refused_and_the_job_is_unaffected(self):
        port = free_port()
        env = {"MCCL_LOG_LEVEL": "DEBUG", "MCCL_CONNECT_TIMEOUT_MS": "60000"}
        mode = ["ops", "1", "7", "4099"]
        self.ranks = [Rank(r, 3, port, mode, env) for r in (0, 1)]
        store = connect_store(port, STARTUP_TIMEOUT)
        self.addCleanup(store.close)
        ep0 = store.get("mccl/0/ep/0", STARTUP_TIMEOUT)
        ep1 = store.get("mccl/0/ep/1", STARTUP_TIMEOUT)
        token = store.get("mccl/0/token", STARTUP_TIMEOUT)
        # Rank 1 has dialled rank 0 before this line shows: from now on a
        # hello claiming rank 1 is a duplicate at rank 0.
        seen = self.ranks[0].wait_for_line(r"accepted rank 1 from", STARTUP_TIMEOUT, "stderr")
        self.assertIsNotNone(seen, self.ranks[0].describe())

        good = hello(2, 1, 3, token)
        cases = [
            ("wrong token", ep1, frame(HELLO, hello(2, 1, 3, "not-the-token")), "wrong job token"),
            ("wrong version", ep1, frame(HELLO, good, version=VERSION + 1), "version 3 is not supported"),
            ("duplicate rank", ep0, frame(HELLO, hello(1, 0, 3, token)), "duplicate connection from rank 1"),
            ("rank outside the world", ep1,
             frame(HELLO, struct.pack("<IIIH", 7, 1, 3, len(token)) + token.encode()),
             "not below world_size 3"),
            ("other world size", ep1, frame(HELLO, hello(5, 1, 8, token)), "world size 8"),
            ("other communicator", ep1, frame(HELLO, good, comm=99), "communicator id 99"),
            ("not mccl", ep1, b"GET / HTTP/1.0\r\n\r\n" + b"\0" * 40, "not an mccl peer"),
            ("oversized length", ep1, frame(HELLO, b"", length=1 << 30), "exceeds the limit"),
        ]
        for name, ep, data, expect in cases:
            with self.subTest(stray=name):
                reason = knock(ep, data)
                print(f"  {name}: refused with \"{reason}\"", file=sys.stderr, flush=True)
                self.assertIsNotNone(reason, f"{name}: closed without a refusal")
                self.assertIn(expect, reason)
        # A stray that closes at once, and one that sends half a header.
        knock(ep1, b"", read_reply=False)
        knock(ep1, frame(HELLO, good)[:20], read_reply=False)

        # Each refusal was logged by the rank it reached, naming the reason.
        for name, ep, _, expect in cases:
            target = self.ranks[0] if ep == ep0 else self.ranks[1]
            with self.subTest(logged=name):
                self.assertIsNotNone(
                    target.wait_for_line(r"refused a connection from 127\.0\.0\.1:\d+: .*"
                                         + expect.replace("(", r"\(").replace(")", r"\)"),
                                         10.0, "stderr"), target.describe())

        # The real rank 2 joins; the job runs with every result checked.
        # Meanwhile garbage reaches the rendezvous store, which rank 0 serves
        # until the job ends: it drops that client and serves the others.
        self.ranks.append(Rank(2, 3, port, mode, env))
        with socket.create_connection(("127.0.0.1", port), timeout=5.0) as s:
            s.sendall(b"\x09" + b"\xff" * 64)
            s.settimeout(5.0)
            try:
                self.assertEqual(s.recv(1), b"", "the store answered a malformed request")
            except ConnectionResetError:
                pass
        for r in self.ranks:
            self.assertTrue(r.wait_exit(JOB_TIMEOUT), r.describe())
        for r in self.ranks:
            self.assertEqual(r.returncode, 0, r.describe())
            self.assertIsNotNone(r.find_line(r"ops: 0 failure\(s\)"), r.describe())
        self.assertIsNotNone(self.ranks[0].find_line(r"rendezvous store: dropping client", "stderr"),
                             self.ranks[0].describe())


if __name__ == "__main__":
    if not os.access(MCCL_CHECK, os.X_OK):
        sys.exit(f"mccl_check not found at {MCCL_CHECK}; build it or set MCCL_CHECK")
    unittest.main()
