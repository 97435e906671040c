#!/usr/bin/env bash
# Runs mpi-bench (Open MPI) on N local ranks over one transport, for
# comparison with mccl-bench:
#
#   bash bench/run_mpi_bench.sh N VARIANT [mpi-bench args...]
#   bash bench/run_mpi_bench.sh 2 tcp -b 4 -e 64M
#   bash bench/run_mpi_bench.sh 4 sm -o allgather --json out.jsonl
#
# VARIANT
#   tcp  loopback TCP: --mca btl "tcp,self" --mca btl_tcp_if_include lo
#        --mca oob_tcp_if_include lo
#   sm   shared memory: --mca btl "vader,self" --mca oob_tcp_if_include lo
# Both pin the ob1 PML (--mca pml ob1), so the BTL chosen above carries the
# data even where UCX would otherwise take over. The ranks are not bound
# (--oversubscribe --bind-to none), unless MPI_BIND=share: then, with at
# least as many CPUs as ranks (nproc), each gets an equal, disjoint share, as
# mcclrun --bind-to auto gives mccl's ranks (--map-by slot:PE=K --bind-to
# core, K = CPUs / N). On the 16-core machine the two measured alike within
# the spread of runs (docs/performance.md, "Scaling on 16 cores"); comparisons
# leave Open MPI unbound, as mpirun leaves more than 2 ranks on one socket.
# Every run also gets --allow-run-as-root when run as root, and --variant
# VARIANT for mpi-bench's JSON records.
#
# Settings (environment):
#   BUILD_DIR        default <repo>/build (needs bench/mpi-bench built there)
#   MPI_BENCH        the mpi-bench binary, default $BUILD_DIR/bench/mpi-bench
#   MPI_BENCH_TIMEOUT  seconds before the run is killed, default 600
#   MPI_BIND         none (default) or share (see above)
#   MPIRUN_ARGS      further mpirun arguments, e.g. "--mca coll_tuned_use_dynamic_rules 1
#                    --mca coll_tuned_allreduce_algorithm 4" (mpi-bench's
#                    algorithm column then lists the coll parameters). Open MPI's
#                    ranks busy-poll; on a loaded machine "--mca mpi_yield_when_idle 1"
#                    makes them yield (Open MPI sets it itself when N exceeds the cores)
#
# The run never outlives the timeout: `timeout -k 10` sends TERM to mpirun's
# process group, then KILL 10 s later. Afterwards (and on Ctrl-C) every
# process still carrying this run's MPI_BENCH_RUN_ID in its environment is
# killed by pid. The exit status is mpirun's (124 after a timeout).

set -u

usage() {
  echo "usage: bash bench/run_mpi_bench.sh N tcp|sm [mpi-bench args...]" >&2
  exit 2
}

[[ $# -ge 2 ]] || usage
N="$1"
VARIANT="$2"
shift 2
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "run_mpi_bench: N must be a positive integer, got \"$N\"" >&2; usage; }

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$REPO_ROOT/build}"
BENCH="${MPI_BENCH:-$BUILD_DIR/bench/mpi-bench}"
LIMIT="${MPI_BENCH_TIMEOUT:-600}"
[[ "$LIMIT" =~ ^[1-9][0-9]*$ ]] || { echo "run_mpi_bench: MPI_BENCH_TIMEOUT must be a positive integer" >&2; exit 2; }

if ! command -v mpirun >/dev/null 2>&1; then
  echo "run_mpi_bench: mpirun not found (Debian: apt-get install openmpi-bin libopenmpi-dev)" >&2
  exit 2
fi
if [[ ! -x "$BENCH" ]]; then
  echo "run_mpi_bench: $BENCH is missing; build it with" >&2
  echo "  cmake -S $REPO_ROOT -B $BUILD_DIR -DCMAKE_BUILD_TYPE=Release && cmake --build $BUILD_DIR --target mpi-bench" >&2
  exit 2
fi

case "$VARIANT" in
  tcp) TRANSPORT=(--mca pml ob1 --mca btl "tcp,self" --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo) ;;
  sm)  TRANSPORT=(--mca pml ob1 --mca btl "vader,self" --mca oob_tcp_if_include lo) ;;
  *)   echo "run_mpi_bench: VARIANT must be tcp or sm, got \"$VARIANT\"" >&2; usage ;;
esac

ROOT_ARGS=()
[[ "$(id -u)" -eq 0 ]] && ROOT_ARGS=(--allow-run-as-root)

# shellcheck disable=SC2206 # MPIRUN_ARGS is split on purpose
EXTRA=(${MPIRUN_ARGS:-})

# Marks every rank (mpirun exports it) so that leftovers can be found by pid.
RUN_ID="mpi-bench-$$-$RANDOM$RANDOM"

# Kills, by pid, every process whose environment holds this run's id.
cleanup() {
  local pids=() f pid
  for f in /proc/[0-9]*/environ; do
    pid="${f#/proc/}"
    pid="${pid%/environ}"
    [[ "$pid" == "$$" ]] && continue
    if { tr '\0' '\n' <"$f" | grep -qxF "MPI_BENCH_RUN_ID=$RUN_ID"; } 2>/dev/null; then
      pids+=("$pid")
    fi
  done
  if [[ ${#pids[@]} -gt 0 ]]; then
    echo "run_mpi_bench: killing leftover processes ${pids[*]}" >&2
    kill -KILL "${pids[@]}" 2>/dev/null
  fi
}

RUN_PID=""
# shellcheck disable=SC2317 # called through trap
on_signal() {
  trap - INT TERM HUP
  [[ -n "$RUN_PID" ]] && kill -TERM "$RUN_PID" 2>/dev/null && wait "$RUN_PID" 2>/dev/null
  cleanup
  exit 130
}
trap on_signal INT TERM HUP

CPUS=$(nproc)
if [[ ${MPI_BIND:-none} == share ]] && (( N <= CPUS )); then
  PLACE=(--map-by "slot:PE=$(( CPUS / N ))" --bind-to core)
else
  PLACE=(--oversubscribe --bind-to none)
fi

# timeout runs in the background (so the traps above run at once) with its own
# process group; mpirun reads no stdin.
MPI_BENCH_RUN_ID="$RUN_ID" timeout -k 10 "$LIMIT" \
  mpirun "${ROOT_ARGS[@]}" -n "$N" "${PLACE[@]}" "${TRANSPORT[@]}" \
    -x MPI_BENCH_RUN_ID "${EXTRA[@]}" "$BENCH" --variant "$VARIANT" "$@" </dev/null &
RUN_PID=$!
wait "$RUN_PID"
rc=$?
RUN_PID=""
[[ $rc -eq 124 ]] && echo "run_mpi_bench: killed after ${LIMIT} s (MPI_BENCH_TIMEOUT)" >&2
cleanup
exit "$rc"
