#!/usr/bin/env bash
# Allreduce of 4 KiB to 1 MiB on 16 and 32 ranks of one host: the host
# board's staged allreduce (board_rs) against the engine's table and Open
# MPI's shared memory, every variant once per round, the order rotated
# between rounds, then bench/board_rs_table.py's medians and ratios.
#
#   bash bench/board_rs_rounds.sh                  # build/ of this checkout
#   BUNDLE=out/midsize bash bench/board_rs_rounds.sh   # bench/device_bundle.sh's folder
#
# Variants (one mccl build; MCCL_* set per run):
#   table    the built-in choice: board up to 16 KiB (and less when all ranks'
#            inputs reach 256 KiB), board_rs above, up to 1 MiB
#   engine   MCCL_SHM_STAGE_BYTES=0: no board_rs, the choice before it
#            (board up to 16 KiB, then rd / rabenseifner)
#   rs64k    board_rs at every size, 64 KiB pieces
#   rs256k   board_rs at every size, 256 KiB pieces (the default)
#   rs1m     board_rs at every size, 1 MiB pieces
#   mpi      Open MPI, vader (bench/run_mpi_bench.sh N sm); skipped without mpirun
#
# Settings (environment): BUNDLE (folder with mccl-bench and its libraries;
# default build/bench with the build's own RUNPATH), MPI_BENCH (mpi-bench;
# default: compiled from bench/mpi_bench.cpp with mpicxx into /tmp),
# RANKS ("16 32"), ROUNDS (3), SZ ("-b 4K -e 1M -f 2 -n 300 -w 30"),
# RES (/tmp/board_rs), OUT (when set: RES is packed into $OUT/board_rs.tar).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUNDLE=${BUNDLE:-build/bench}
case $BUNDLE in
  build/bench) ;;                                   # the build's RUNPATH finds its libraries
  /*) export LD_LIBRARY_PATH=$BUNDLE ;;
  *) export LD_LIBRARY_PATH=$PWD/$BUNDLE ;;
esac
RANKS=${RANKS:-"16 32"}; ROUNDS=${ROUNDS:-3}; SZ=${SZ:-"-b 4K -e 1M -f 2 -n 300 -w 30"}
RES=${RES:-/tmp/board_rs}; mkdir -p "$RES"
VARIANTS=(table engine rs64k rs256k rs1m mpi)
MPI=${MPI_BENCH:-/tmp/mpi-bench}
if command -v mpirun >/dev/null 2>&1 && [ ! -x "$MPI" ] && command -v mpicxx >/dev/null 2>&1; then
  mpicxx -O3 -DNDEBUG -std=c++17 -DOMPI_SKIP_MPICXX=1 -o "$MPI" bench/mpi_bench.cpp > "$RES/mpicxx.txt" 2>&1
fi
{ date -u; uname -a; nproc; df -h /dev/shm; ulimit -n; mpirun --version 2>&1 | head -1; } > "$RES/machine.txt" 2>&1

run() { # ranks variant round
  local n=$1 v=$2 k=$3 json="$RES/n$1_$2_r$3.jsonl" mccl=()
  local bench=(python3 tools/mcclrun --timeout 300 -n "$n" -- "$BUNDLE/mccl-bench" -o allreduce $SZ --no-check)
  case $v in
    table)  mccl=(env) ;;
    engine) mccl=(env MCCL_SHM_STAGE_BYTES=0) ;;
    rs64k)  mccl=(env MCCL_SHM_STAGE_BYTES=64K) ; bench+=(-a board_rs) ;;
    rs256k) mccl=(env MCCL_SHM_STAGE_BYTES=256K) ; bench+=(-a board_rs) ;;
    rs1m)   mccl=(env MCCL_SHM_STAGE_BYTES=1M) ; bench+=(-a board_rs) ;;
    mpi)
      if [ -x "$MPI" ]; then
        MPI_BENCH="$MPI" bash bench/run_mpi_bench.sh "$n" sm -o allreduce $SZ --no-check --json "$json" \
          > "$RES/n$1_$2_r$3.txt" 2>&1
      else
        echo "skipped: no mpirun / mpi-bench" > "$RES/n$1_$2_r$3.txt"
      fi
      return ;;
  esac
  "${mccl[@]}" "${bench[@]}" --json "$json" > "$RES/n$1_$2_r$3.txt" 2>&1
  echo "rc=$?" >> "$RES/n$1_$2_r$3.txt"
}

for k in $(seq 1 "$ROUNDS"); do
  for n in $RANKS; do
    for i in "${!VARIANTS[@]}"; do # rotated: round k starts k-1 further on
      v=${VARIANTS[$(( (i + k - 1) % ${#VARIANTS[@]} ))]}
      echo "round $k, $n ranks: $v"
      run "$n" "$v" "$k"
    done
  done
done
python3 bench/board_rs_table.py "$RES" | tee "$RES/table.md"
if [ -n "${OUT:-}" ]; then tar -C "$(dirname "$RES")" -cf "$OUT/board_rs.tar" "$(basename "$RES")"; fi
