#!/usr/bin/env bash
# Sweeps every registered algorithm of the ops that have a choice, on each
# world size, with mccl-bench, and prints p50 per size per algorithm and the
# fastest algorithm per (op, N, size).
#
#   bash bench/sweep_algorithms.sh                  # N = 2 and 4
#   NS="2 3 4" ITERS=50 bash bench/sweep_algorithms.sh
#
# Settings (environment):
#   NS           world sizes, default "2 4"
#   OPS          ops to sweep, default "allreduce broadcast reduce allgather reduce_scatter"
#   ITERS        timed iterations per size, default 200 (warm-up: ITERS / 10)
#   MIN MAX FACTOR  sizes, default 4, 16M, 4 (mccl-bench's -b -e -f)
#   RUN_TIMEOUT  seconds per mccl-bench run before it is killed, default 300
#   BUILD_DIR    default <repo>/build (needs bench/mccl-bench built there)
#   LOG_DIR      where each run's output is kept, default a new temporary directory
#
# Each run is `mcclrun -n N -- mccl-bench -o OP -a ALGO -b MIN -e MAX -f FACTOR
# -n ITERS`; one more short run per (op, N) without -a records which algorithm
# mccl's built-in table picks per size (the "table" column). A run that fails
# or times out is reported and left out; the sweep goes on. Runtime with the
# defaults on 2 cores: about 5 minutes.

set -u

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NS="${NS:-2 4}"
OPS="${OPS:-allreduce broadcast reduce allgather reduce_scatter}"
ITERS="${ITERS:-200}"
MIN="${MIN:-4}"
MAX="${MAX:-16M}"
FACTOR="${FACTOR:-4}"
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
BUILD_DIR="${BUILD_DIR:-$REPO_ROOT/build}"
BENCH="$BUILD_DIR/bench/mccl-bench"
MCCLRUN="$REPO_ROOT/tools/mcclrun"

if [[ ! -x "$BENCH" ]]; then
  echo "sweep_algorithms: $BENCH is missing; build it with" >&2
  echo "  cmake -S $REPO_ROOT -B $BUILD_DIR -DCMAKE_BUILD_TYPE=Release && cmake --build $BUILD_DIR --target mccl-bench" >&2
  exit 2
fi
command -v timeout >/dev/null || { echo "sweep_algorithms: needs timeout (coreutils)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "sweep_algorithms: needs python3 (as mcclrun does)" >&2; exit 2; }
[[ "$RUN_TIMEOUT" =~ ^[0-9]+$ && "$RUN_TIMEOUT" -ge 20 ]] || { echo "sweep_algorithms: RUN_TIMEOUT must be a number of seconds >= 20" >&2; exit 2; }

# The algorithms registered for each op (collectives/extension/registry.cpp).
algorithms() { # op N
  case "$1" in
    allreduce) if [[ "$2" == 2 ]]; then echo "oneshot direct ring rd rabenseifner"; else echo "oneshot ring rd rabenseifner"; fi ;;
    broadcast) echo "tree chain scatter_allgather" ;;
    reduce) echo "tree ring" ;;
    allgather) echo "ring rd" ;;
    reduce_scatter) echo "ring rd" ;;
    alltoall) echo "pairwise" ;;
    gather | scatter) echo "linear" ;;
    barrier) echo "dissemination" ;;
    *) echo "sweep_algorithms: unknown op $1" >&2; return 1 ;;
  esac
}

if [[ -z "${LOG_DIR:-}" ]]; then
  LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/mccl-sweep.XXXXXX")"
fi
mkdir -p "$LOG_DIR"
RESULTS="$LOG_DIR/results.tsv"
: >"$RESULTS"

# One mccl-bench run under mcclrun, bounded twice: mcclrun stops the ranks
# itself shortly before the outer timeout would kill it (and SIGKILL 10 s later).
run_bench() { # log N args...
  local log="$1" n="$2"
  shift 2
  timeout -k 10 "$RUN_TIMEOUT" python3 "$MCCLRUN" -n "$n" --timeout "$((RUN_TIMEOUT - 5))" -- \
    "$BENCH" "$@" </dev/null >"$log" 2>&1
}

# Appends rank 0's rows of a log to the results: N op algo bytes p50 check ran.
collect() { # log N op algo
  awk -v n="$2" -v op="$3" -v algo="$4" \
    '$1 == "[0]" && $2 ~ /^[0-9]+$/ && NF >= 9 { print n "\t" op "\t" algo "\t" $2 "\t" $4 "\t" $8 "\t" $9 }' \
    "$1" >>"$RESULTS"
}

echo "# mccl algorithm sweep, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, commit $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# N in: $NS; ops: $OPS; sizes $MIN..$MAX x$FACTOR; $ITERS iterations per size; timeout ${RUN_TIMEOUT}s per run"
echo "# per run: mcclrun -n N -- mccl-bench -o OP -a ALGO -b $MIN -e $MAX -f $FACTOR -n $ITERS; logs in $LOG_DIR"
sweep_start=$SECONDS
failures=0
for n in $NS; do
  for op in $OPS; do
    algos="$(algorithms "$op" "$n")" || exit 2
    for algo in $algos; do
      log="$LOG_DIR/n$n-$op-$algo.log"
      t0=$SECONDS
      run_bench "$log" "$n" -o "$op" -a "$algo" -b "$MIN" -e "$MAX" -f "$FACTOR" -n "$ITERS"
      rc=$?
      collect "$log" "$n" "$op" "$algo"
      rows=$(awk '$1 == "[0]" && $2 ~ /^[0-9]+$/' "$log" | wc -l)
      status="ok"
      if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        status="TIMED OUT (rc $rc)"
      elif [[ $rc -ne 0 ]]; then
        status="FAILED (rc $rc)"
      fi
      [[ $rc -ne 0 ]] && failures=$((failures + 1))
      printf '# run N=%s %-14s %-17s %-20s %2d sizes, %3d s\n' "$n" "$op" "$algo" "$status" "$rows" "$((SECONDS - t0))"
      if [[ $rc -ne 0 ]]; then
        grep -v '^\[0\]  ' "$log" | tail -n 5 | sed 's/^/#   /'
      fi
    done
    # The built-in table's choice per size: one untimed, unchecked iteration.
    log="$LOG_DIR/n$n-$op-table.log"
    if run_bench "$log" "$n" -o "$op" -b "$MIN" -e "$MAX" -f "$FACTOR" -n 1 -w 0 --no-check; then
      collect "$log" "$n" "$op" "(table)"
    else
      echo "# run N=$n $op (table choice) FAILED (rc $?)"
      failures=$((failures + 1))
    fi
  done
done
echo "# sweep took $((SECONDS - sweep_start)) s; $failures run(s) failed"
echo

python3 - "$RESULTS" <<'PY'
import sys
from collections import OrderedDict

def human(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift}{unit}"
    return str(b)

# (n, op) -> algo -> bytes -> (p50, check, ran); table choices separately.
runs = OrderedDict()
table = {}
for line in open(sys.argv[1]):
    n, op, algo, nbytes, p50, check, ran = line.rstrip("\n").split("\t")
    key = (int(n), op)
    nbytes = int(nbytes)
    if algo == "(table)":
        table[(key, nbytes)] = ran
        continue
    runs.setdefault(key, OrderedDict()).setdefault(algo, {})[nbytes] = (float(p50), check, ran)

def usable(cell, algo):
    # A forced algorithm that fell back to the table, or a wrong result, does not count.
    return cell is not None and cell[1] == "ok" and cell[2] == algo

print("p50 per size (us; the slowest rank's time per iteration, median over iterations).")
print("'*' the forced algorithm did not run at this size (the table's choice ran), '!' a wrong result,")
print("'-' no result. 'table': the algorithm mccl's built-in table picks.")
fastest_rows = []
for (n, op), algos in runs.items():
    sizes = sorted({b for cells in algos.values() for b in cells})
    names = list(algos)
    width = max(9, *(len(a) + 1 for a in names))
    print()
    print(f"{op}, N={n}")
    print(f"  {'bytes':>8}" + "".join(f"{a:>{width}}" for a in names) + "   table")
    for b in sizes:
        cols = []
        for a in names:
            cell = algos[a].get(b)
            if cell is None:
                text = "-"
            else:
                text = f"{cell[0]:.1f}"
                if cell[2] != a:
                    text += "*"
                if cell[1] != "ok":
                    text += "!"
            cols.append(f"{text:>{width}}")
        choice = table.get(((n, op), b), "?")
        print(f"  {human(b):>8}" + "".join(cols) + f"   {choice}")
        ranked = sorted((algos[a][b][0], a) for a in names if usable(algos[a].get(b), a))
        if ranked:
            fastest_rows.append((op, n, b, ranked, choice))

print()
print("fastest algorithm per (op, N, size)")
print(f"  {'op':<15}{'N':>2} {'bytes':>8}  {'fastest':<18}{'p50(us)':>10}  {'runner-up':<18}{'+%':>6}  {'table':<18}{'table +%':>9}")
for op, n, b, ranked, choice in fastest_rows:
    best_t, best = ranked[0]
    if len(ranked) > 1:
        second, second_pct = ranked[1][1], f"{100.0 * (ranked[1][0] / best_t - 1):.0f}"
    else:
        second, second_pct = "-", "-"
    table_t = next((t for t, a in ranked if a == choice), None)
    table_pct = "-" if table_t is None else f"{100.0 * (table_t / best_t - 1):.0f}"
    print(f"  {op:<15}{n:>2} {human(b):>8}  {best:<18}{best_t:>10.1f}  {second:<18}{second_pct:>6}  {choice:<18}{table_pct:>9}")
PY
status=$?
[[ $failures -eq 0 && $status -eq 0 ]]
