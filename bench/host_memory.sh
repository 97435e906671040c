#!/usr/bin/env bash
# The rates mccl-sim's host model takes (tools/mccl_sim/board_model.hpp):
# bench/memory_bandwidth.cpp for 1 to 64 processes copying 64 MiB buffers
# at once (--host-memory) and for 1 to 64 copying 1 MiB buffers
# (--host-cache), and bench/peer_bandwidth.cpp for 8 to 32 processes
# copying 1 MiB banks other cores wrote (--host-peer: its rate of reading
# the peers' banks), each point 2 s. Prints the three curves in mccl-sim's
# form after the raw lines. Where a machine's hypervisor takes CPU time
# away from many spinning processes (bench/slow_mode_probe.sh), keep the
# peer curve to the counts it does not.
#
#   bash bench/host_memory.sh [MEMORY_BANDWIDTH_BINARY [PEER_BANDWIDTH_BINARY]]   # default: compiled into /tmp
#
# Settings (environment): PROCS ("1 2 4 8 16 24 32 40 48 56 64"; counts
# above the machine's cores are skipped), CACHE_PROCS ("1 16 32 64"),
# PEER_PROCS ("8 16 24 32").
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${1:-/tmp/memory_bandwidth}
peer_bin=${2:-/tmp/peer_bandwidth}
if [ ! -x "$bin" ]; then
  g++ -O2 -o "$bin" bench/memory_bandwidth.cpp
fi
if [ ! -x "$peer_bin" ]; then
  g++ -O2 -o "$peer_bin" bench/peer_bandwidth.cpp
fi
cores=$(nproc)
curve() { # bytes procs...
  local bytes=$1 points=() p line
  shift
  for p in "$@"; do
    [ "$p" -le "$cores" ] || continue
    line=$("$bin" "$p" "$bytes")
    echo "$line" >&2
    points+=("$p:$(echo "$line" | sed -E 's/.*: ([0-9.]+) GB\/s moved.*/\1/')")
  done
  (IFS=,; echo "${points[*]}")
}
peer_curve() { # procs...
  local points=() p line
  for p in "$@"; do
    [ "$p" -le "$cores" ] || continue
    line=$("$peer_bin" "$p" $((1 << 20)))
    echo "$line" >&2
    points+=("$p:$(echo "$line" | sed -E "s/.*read from peers' banks ([0-9.]+);.*/\1/")")
  done
  (IFS=,; echo "${points[*]}")
}
memory=$(curve $((64 << 20)) ${PROCS:-1 2 4 8 16 24 32 40 48 56 64})
cache=$(curve $((1 << 20)) ${CACHE_PROCS:-1 16 32 64})
peer=$(peer_curve ${PEER_PROCS:-8 16 24 32})
echo "--host-memory $memory --host-cache $cache --host-peer $peer"
