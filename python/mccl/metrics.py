"""A process-wide summary of the ops mccl ran for torch.distributed."""

import logging

from . import _C

_log = logging.getLogger("mccl")


def get_metrics():
    """{total_ops, total_bytes, errors, p50_latency_ms, p99_latency_ms,
    peak_throughput_gbps, algorithms: {op: {algorithm: count}}} since the
    start or the last reset_metrics(), over every process group."""
    return _C.get_metrics()


def log_metrics(level=logging.INFO):
    """Writes the summary to the "mccl" logger and returns the line."""
    line = _C.metrics_line()
    _log.log(level, line)
    return line


def reset_metrics():
    """Zeroes the summary."""
    _C.reset_metrics()
