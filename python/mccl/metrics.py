"""What mccl did in this process, over every process group (and every
communicator of the C++ API): mccl.get_metrics() and friends.

    m = mccl.get_metrics()
    m.total_ops, m.p99_latency_ms, m.wire_bytes
    m.ops["allreduce"].algorithms        # {"rd": 8, "ring": 2}
    m.links[0].bytes_sent, m.links[0].retransmits
    dict(m)                              # plain data, e.g. for json.dumps
"""

import json

from . import _lib


class _Record:
    """Attributes over a dict, convertible back with dict(record)."""

    def __init__(self, data):
        self._data = data

    def __getattr__(self, name):
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}; "
                                 f"fields: {', '.join(self._data)}") from None

    def __getitem__(self, name):
        return self._data[name]

    def keys(self):
        return self._data.keys()

    def to_dict(self):
        return {k: (v.to_dict() if isinstance(v, _Record) else
                    {n: x.to_dict() for n, x in v.items()} if isinstance(v, dict) and v
                    and isinstance(next(iter(v.values())), _Record) else
                    [x.to_dict() for x in v] if isinstance(v, list) else v)
                for k, v in self._data.items()}

    def __repr__(self):
        inner = ", ".join(f"{k}={v!r}" for k, v in self._data.items()
                          if not isinstance(v, (dict, list)))
        return f"{type(self).__name__}({inner})"


class OpMetrics(_Record):
    """One kind of op: ops, errors, bytes, wire_bytes, p50_latency_ms,
    p99_latency_ms, algorithms ({algorithm: ops})."""


class LinkMetrics(_Record):
    """One link of one communicator: comm_id, rank, peer, bytes_sent,
    bytes_received, retransmits, reconnects."""


class Metrics(_Record):
    """total_ops, errors, total_bytes (before compression), wire_bytes
    (payload bytes sent, after compression), p50_latency_ms,
    p99_latency_ms, peak_throughput_gbps, algorithms ({op: {algorithm:
    ops}}), ops ({op: OpMetrics}), links ([LinkMetrics])."""

    def __init__(self, data):
        data = dict(data)
        data["ops"] = {name: OpMetrics(op) for name, op in data["ops"].items()}
        data["links"] = [LinkMetrics(link) for link in data["links"]]
        data["algorithms"] = {name: dict(op["algorithms"]) for name, op in data["ops"].items()}
        super().__init__(data)


def get_metrics():
    """The summary since the start or the last reset_metrics()."""
    return Metrics(json.loads(_lib.text("mccl_metrics_json")))


def log_metrics():
    """Writes the summary as one line to stderr through mccl's logger
    (whatever MCCL_LOG_LEVEL says) and returns the line."""
    _lib.call("mccl_log_metrics")
    return _lib.text("mccl_metrics_summary")


def reset_metrics():
    """Zeroes the summary."""
    _lib.call("mccl_reset_metrics")
