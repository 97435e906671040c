#!/usr/bin/env bash
# Collectives on many ranks of one host: mccl's built-in table (the host
# board's stage above its banks: board_stage, board_rs) against the engine
# (MCCL_SHM_STAGE_BYTES=0: the table before the stage took these ops) and
# Open MPI's shared memory, and over TCP mccl against Open MPI's tcp BTL,
# every variant once per round in an order rotated between rounds;
# bench/board_stage_table.py makes the medians, the ratios (each
# transport's to Open MPI's on it) and each cell's slowest round over its
# median.
#
# Variants:
#   table    mccl's built-in choice (the board's banks, then its stage)
#   before   the same with another build: the bundle named by BEFORE (an A/B
#            of a change against the build before it)
#   engine   MCCL_SHM_STAGE_BYTES=0: no stage, the table before it
#   rs64k, rs256k, rs1m
#            the op's staged algorithm (board_rs for allreduce and reduce,
#            board_stage otherwise) at every size, with stage banks of 64 KiB,
#            256 KiB or 1 MiB
#   mpi      Open MPI's shared memory (vader)
#   tcp      mccl with MCCL_TRANSPORT=tcp
#   mpitcp   Open MPI's tcp BTL
#
#   bash bench/board_stage_rounds.sh                      # build/ of this checkout
#   BUNDLE=out/stage ROUND=2 bash bench/board_stage_rounds.sh   # one round, on a device
#
# Settings (environment): BUNDLE (folder of bench/device_bundle.sh; default
# build/bench with the build's own RUNPATH), BEFORE (another such folder,
# for the variant before), MPI_BENCH (default: compiled
# from bench/mpi_bench.cpp into /tmp), RANKS ("16 32 64"), OPS ("broadcast
# allgather reduce_scatter reduce"), VARIANTS ("table engine mpi"), ROUND
# (first round's number: names the files, picks the rotation; 1), ROUNDS
# (rounds in this call; 1), SZ ("-b 4K -e 64M -f 4 -n 20 -w 3"), RES
# (/tmp/board_stage), BUDGET (seconds: no new run starts after it; 540),
# OUT (when set: RES is packed into $OUT/board_stage.tar after every run,
# so what ran comes back even if the call is cut off).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUNDLE=${BUNDLE:-build/bench}
case $BUNDLE in
  build/bench) ;;
  /*) export LD_LIBRARY_PATH=$BUNDLE ;;
  *) export LD_LIBRARY_PATH=$PWD/$BUNDLE ;;
esac
RANKS=${RANKS:-"16 32 64"}; OPS=${OPS:-"broadcast allgather reduce_scatter reduce"}
read -ra VARIANTS <<< "${VARIANTS:-table engine mpi}"
ROUND=${ROUND:-1}; ROUNDS=${ROUNDS:-1}; SZ=${SZ:-"-b 4K -e 64M -f 4 -n 20 -w 3"}
RES=${RES:-/tmp/board_stage}; BUDGET=${BUDGET:-540}; mkdir -p "$RES"
T0=$(date +%s)
MPI=${MPI_BENCH:-/tmp/mpi-bench}
if command -v mpirun >/dev/null 2>&1 && [ ! -x "$MPI" ] && command -v mpicxx >/dev/null 2>&1; then
  mpicxx -O3 -DNDEBUG -std=c++17 -DOMPI_SKIP_MPICXX=1 -o "$MPI" bench/mpi_bench.cpp > "$RES/mpicxx.txt" 2>&1
fi
{ date -u; uname -a; nproc; df -h /dev/shm; ulimit -n; mpirun --version 2>&1 | head -1; } > "$RES/machine_r$ROUND.txt" 2>&1

pack() { if [ -n "${OUT:-}" ]; then tar -C "$(dirname "$RES")" -cf "$OUT/board_stage.tar" "$(basename "$RES")"; fi; }

run() { # ranks op variant round
  local n=$1 op=$2 v=$3 k=$4 name="$RES/n$1_$2_$3_r$4"
  if [ $(( $(date +%s) - T0 )) -gt "$BUDGET" ]; then echo "skipped: time budget" > "$name.txt"; return; fi
  case $v in
    table|before|engine|tcp|rs64k|rs256k|rs1m)
      local set=() algo=() bundle=$BUNDLE
      case $v in
        before) bundle=${BEFORE:?BEFORE names the bundle of the build before}
                case $bundle in /*) ;; *) bundle=$PWD/$bundle ;; esac
                set=(LD_LIBRARY_PATH=$bundle) ;;
        engine) set=(MCCL_SHM_STAGE_BYTES=0) ;;
        tcp) set=(MCCL_TRANSPORT=tcp) ;;
        rs*)
          set=(MCCL_SHM_STAGE_BYTES=${v#rs}) # 64k, 256k, 1m: byte sizes are case-insensitive
          case $op in allreduce|reduce) algo=(-a board_rs) ;; *) algo=(-a board_stage) ;; esac ;;
      esac
      env "${set[@]}" python3 tools/mcclrun --timeout 300 -n "$n" -- "$bundle/mccl-bench" -o "$op" "${algo[@]}" $SZ \
        --json "$name.jsonl" > "$name.txt" 2>&1 ;;
    mpi|mpitcp)
      if [ -x "$MPI" ]; then
        local btl=sm; [ "$v" = mpitcp ] && btl=tcp
        MPI_BENCH="$MPI" MPI_BENCH_TIMEOUT=300 bash bench/run_mpi_bench.sh "$n" $btl -o "$op" $SZ \
          --json "$name.jsonl" > "$name.txt" 2>&1
      else
        echo "skipped: no mpirun / mpi-bench" > "$name.txt"
      fi ;;
  esac
  echo "rc=$? t=$(( $(date +%s) - T0 ))" >> "$name.txt"
  echo "round $k, $n ranks, $op, $v: $(tail -1 "$name.txt")"
  pack
}

for k in $(seq "$ROUND" $(( ROUND + ROUNDS - 1 ))); do
  for n in $RANKS; do
    for op in $OPS; do
      for i in "${!VARIANTS[@]}"; do # rotated: round k starts k-1 further on
        run "$n" "$op" "${VARIANTS[$(( (i + k - 1) % ${#VARIANTS[@]} ))]}" "$k"
      done
    done
  done
done
python3 bench/board_stage_table.py "$RES" > "$RES/table.md" 2>&1
pack
