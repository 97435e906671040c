#!/usr/bin/env bash
# Allreduce scaling on the 16-core machine: mccl (MCCL_TRANSPORT=auto, i.e. shared
# memory), mccl over TCP (MCCL_TRANSPORT=tcp), Open MPI sm (vader) and tcp
# (bench/run_mpi_bench.sh) and torch's gloo (bench/torch_gloo_bench.py) at 2, 4, 8
# and 16 ranks, float32 sum, 4 B .. 64 MiB in x4 steps. Every (system, ranks) cell of
# a round runs once, in an order rotated from round to round; medians over the
# rounds come from bench/scaling_table.py. Placement: mccl's ranks as mcclrun
# places them by default (--bind-to auto: a share of the CPUs each); Open MPI's
# and gloo's unbound, as their launchers leave them (bound like mccl's, gloo
# was slower and Open MPI alike: bench/scaling_16_bound/).
#
# 1. Pack (here, once; a Release build in build/):
#      bench/device_bundle.sh build out/scaling
#    (mccl-bench, mccl_check, libmccl.so.0 and the CAF/ISA-L/Highway libraries it
#    needs; about 7 MiB. out/ is git-ignored, so the device call must carry it.)
# 2. On the device, ONE round per call: 20 cells, estimated 3-5 minutes (not yet
#    measured: bench/board_16's 16-rank cells took 6-8 s at -n 20; gloo was never
#    run there); BUDGET stops it before the 10-minute limit. Device tool: run with
#    carry ["out/scaling"], timeout_s 600, command
#      BUNDLE=out/scaling ROUND=1 bash bench/scaling_rounds.sh
#    then the same with ROUND=2 and ROUND=3 (each round rotates the order
#    differently). Each call leaves $OUT/scaling_round<R>.tar (the folder
#    scaling_round<R>/: one <system>_n<ranks>.txt per cell, device_info.txt,
#    mpicxx.txt, schedule.txt, console.txt), rewritten after every cell, so what
#    ran comes back even if the call is cut off.
# 3. Here: unpack the fetched tars (FETCHED: where they came back) and make the table:
#      mkdir -p out/scaling_16 && for t in FETCHED/scaling_round*.tar; do tar -C out/scaling_16 -xf $t; done
#      python3 bench/scaling_table.py out/scaling_16/scaling_round*
#
#   bash bench/scaling_rounds.sh [ROUNDS]   runs ROUNDS rounds (default 1) numbered
#                                           ROUND, ROUND+1, ... in one call
#
# Settings (environment):
#   BUNDLE     folder of bench/device_bundle.sh (default out/scaling); LD_LIBRARY_PATH
#              is set to it. MCCL_BENCH overrides the binary (default $BUNDLE/mccl-bench)
#   ROUND      number of the first round of this call (default 1): names the files
#              and picks the rotation
#   RANKS      rank counts (default "2 4 8 16")
#   SYSTEMS    default "mccl mccltcp mpism mpitcp gloo"
#   SZ         size/iteration options, passed alike to all three benchmarks
#              (default "-b 4 -e 64M -f 4 -n 40 -w 4")
#   BUDGET     seconds for the whole call (default 520); a cell starts only with
#              MIN_LEFT (default 25) seconds left, and is killed (mcclrun --timeout,
#              MPI_BENCH_TIMEOUT) at min(CELL_MAX (default 150), time left - 5)
#              seconds; a skipped cell's file says "skipped (time budget ...)"
#   RES        where the round folders are written (default /tmp/scaling_res)
#   PY         python with torch for gloo (default: the first of python3,
#              /usr/bin/python3 that imports torch.distributed)
#   MPI_BENCH  mpi-bench binary (default build/bench/mpi-bench if present, else
#              compiled with mpicxx from bench/mpi_bench.cpp into /tmp); without
#              either, the MPI cells say "skipped (no mpi-bench ...)"
# Where OUT is set (the device), every round folder is tarred to
# $OUT/scaling_round<R>.tar after each cell.
#
# Local trial (2 cores: keep it tiny), e.g.
#   bench/device_bundle.sh build /tmp/scaling_bundle
#   BUNDLE=/tmp/scaling_bundle RANKS="2" SZ="-b 4 -e 64K -f 16 -n 3" bash bench/scaling_rounds.sh
#   python3 bench/scaling_table.py /tmp/scaling_res/scaling_round1
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
NROUNDS=${1:-1}
ROUND=${ROUND:-1}
[[ $NROUNDS =~ ^[1-9][0-9]*$ && $ROUND =~ ^[1-9][0-9]*$ ]] || { echo "usage: [ROUND=R] bash bench/scaling_rounds.sh [ROUNDS]" >&2; exit 2; }
BUNDLE=${BUNDLE:-out/scaling}
[[ $BUNDLE == /* ]] || BUNDLE=$ROOT/$BUNDLE
MCCL_BENCH=${MCCL_BENCH:-$BUNDLE/mccl-bench}
RANKS=${RANKS:-"2 4 8 16"}
SYSTEMS=${SYSTEMS:-"mccl mccltcp mpism mpitcp gloo"}
SZ=${SZ:-"-b 4 -e 64M -f 4 -n 40 -w 4"}
BUDGET=${BUDGET:-520}
MIN_LEFT=${MIN_LEFT:-25}
CELL_MAX=${CELL_MAX:-150}
RES=${RES:-/tmp/scaling_res}
export LD_LIBRARY_PATH=$BUNDLE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p "$RES"

# python with torch.distributed, for gloo
if [[ -z ${PY:-} ]]; then
  for p in python3 /usr/bin/python3; do
    if "$p" -c "import torch.distributed" >/dev/null 2>&1; then PY=$p; break; fi
  done
fi
PY=${PY:-}

# mpi-bench
MPIB=${MPI_BENCH:-}
MPIB_WHY=""
MPICXX_LOG=$(mktemp)
if [[ -z $MPIB && -x build/bench/mpi-bench ]]; then
  MPIB=$ROOT/build/bench/mpi-bench; echo "using $MPIB" > "$MPICXX_LOG"
elif [[ -z $MPIB ]]; then
  if command -v mpicxx >/dev/null 2>&1; then
    MPIB=/tmp/scaling-mpi-bench
    mpicxx -O3 -DNDEBUG -std=c++17 -DOMPI_SKIP_MPICXX=1 -o $MPIB bench/mpi_bench.cpp > "$MPICXX_LOG" 2>&1
    rc=$?; echo "mpicxx rc=$rc" >> "$MPICXX_LOG"
    [[ $rc -eq 0 ]] || { MPIB=""; MPIB_WHY="mpicxx failed, see mpicxx.txt"; }
  else
    MPIB_WHY="no build/bench/mpi-bench and no mpicxx"; echo "$MPIB_WHY" > "$MPICXX_LOG"
  fi
fi
command -v mpirun >/dev/null 2>&1 || { MPIB=""; MPIB_WHY="no mpirun"; }

device_info() {
  echo "== date"; date -u; echo "== uname"; uname -a; echo "== nproc"; nproc
  echo "== lscpu"; lscpu; echo "== free"; free -g; echo "== df /dev/shm"; df -h /dev/shm
  echo "== load"; cat /proc/loadavg
  echo "== mpirun"; mpirun --version; echo "== ompi_info btl"; ompi_info | grep -i "btl\|pml"
  echo "== python (gloo: ${PY:-none})"; ${PY:-python3} --version
  [[ -n $PY ]] && $PY -c "import torch, torch.distributed as d; print('torch', torch.__version__, 'gloo', d.is_gloo_available())"
  echo "== mpi-bench"; echo "${MPIB:-none: $MPIB_WHY}"
  echo "== git"; git rev-parse HEAD 2>/dev/null; git status --short 2>/dev/null | head -20
  echo "== settings"; echo "RANKS=$RANKS SYSTEMS=$SYSTEMS SZ=$SZ BUDGET=$BUDGET MIN_LEFT=$MIN_LEFT CELL_MAX=$CELL_MAX MCCL_BENCH=$MCCL_BENCH"
  echo "== MCCL_* / GLOO_* / OMPI_* environment"; env | grep -E '^(MCCL|GLOO|OMPI)_' | sort
  echo "== sha256 $BUNDLE"; sha256sum "$BUNDLE"/* "$MCCL_BENCH" 2>/dev/null
}

# rotate LIST by K: rot K a b c ... prints the words from position K on, then the rest
rot() { local k=$1; shift; local a=("$@") n=$#; local i; for ((i = 0; i < n; i++)); do printf '%s ' "${a[(i + k) % n]}"; done; }

run_cell() { # dir sys n
  local dir=$1 sys=$2 n=$3 f=$1/$2_n$3.txt s left to
  left=$(( BUDGET - $(el) ))
  if [[ $left -lt $MIN_LEFT || $left -lt 10 ]]; then
    echo "# skipped (time budget: $(el) s of BUDGET=$BUDGET s used)" > "$f"
  elif [[ ($sys == mpism || $sys == mpitcp) && -z $MPIB ]]; then
    echo "# skipped (no mpi-bench: $MPIB_WHY)" > "$f"
  elif [[ $sys == gloo && -z $PY ]]; then
    echo "# skipped (no python with torch.distributed)" > "$f"
  else
    to=$(( left - 5 < CELL_MAX ? left - 5 : CELL_MAX ))
    s=$(date +%s%N)
    # shellcheck disable=SC2086 # SZ is split on purpose
    case $sys in
      mccl)    MCCL_TRANSPORT=auto python3 tools/mcclrun -n "$n" --timeout $to -- "$MCCL_BENCH" $SZ ;;
      mccltcp) MCCL_TRANSPORT=tcp  python3 tools/mcclrun -n "$n" --timeout $to -- "$MCCL_BENCH" $SZ ;;
      mpism)   MPI_BENCH=$MPIB MPI_BENCH_TIMEOUT=$to bash bench/run_mpi_bench.sh "$n" sm  $SZ ;;
      mpitcp)  MPI_BENCH=$MPIB MPI_BENCH_TIMEOUT=$to bash bench/run_mpi_bench.sh "$n" tcp $SZ ;;
      gloo)    python3 tools/mcclrun --bind-to none -n "$n" --timeout $to -- "$PY" bench/torch_gloo_bench.py $SZ ;;
      *)       echo "unknown system $sys" ;;
    esac > "$f" 2>&1 </dev/null
    echo "# rc=$? wall_ms=$(( ($(date +%s%N) - s) / 1000000 )) t=$(el) timeout=$to" >> "$f"
  fi
  echo "$(basename "$dir") $sys n=$n: $(tail -1 "$f")" | tee -a "$dir/console.txt"
}

pack() { # round folder name
  [[ -n ${OUT:-} ]] && tar -C "$RES" -cf "$OUT/$1.tar" "$1"
}

read -ra SYS_A <<< "$SYSTEMS"
read -ra RANK_A <<< "$RANKS"
for ((r = ROUND; r < ROUND + NROUNDS; r++)); do
  name=scaling_round$r; dir=$RES/$name
  rm -rf "$dir"; mkdir -p "$dir"
  cp "$MPICXX_LOG" "$dir/mpicxx.txt"
  device_info > "$dir/device_info.txt" 2>&1
  # rotation: rank groups and, inside each, the systems shift by one per round
  order=()
  for n in $(rot $(( (r - 1) % ${#RANK_A[@]} )) "${RANK_A[@]}"); do
    for sys in $(rot $(( (r - 1) % ${#SYS_A[@]} )) "${SYS_A[@]}"); do order+=("$sys:$n"); done
  done
  echo "round $r order: ${order[*]}" | tee "$dir/schedule.txt" | tee -a "$dir/console.txt"
  for cell in "${order[@]}"; do
    run_cell "$dir" "${cell%%:*}" "${cell#*:}"
    pack "$name"
  done
  echo "round $r done at $(el) s" | tee -a "$dir/console.txt"
  pack "$name"
done
rm -f "$MPICXX_LOG"
echo "total $(el) s; results in $RES${OUT:+ and $OUT}"
