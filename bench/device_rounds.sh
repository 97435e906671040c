#!/usr/bin/env bash
# 16-rank allreduce: mccl (auto = shm), mccl (tcp), Open MPI (vader), Open MPI (tcp),
# 3 rounds in rotated order, plus 4-rank 64 MiB mccl (auto) and Open MPI (sm).
set -u
# BUNDLE: the folder bench/device_bundle.sh made (carried to the machine);
# The runs in docs/performance.md used out/shm16 (rings only) and out/board16.
BUNDLE=${BUNDLE:-out/board16}
export LD_LIBRARY_PATH=$PWD/$BUNDLE
R=/tmp/res; mkdir -p $R
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
pack() { tar -C /tmp -cf $OUT/raw.tar res; }
{ echo "== date"; date -u; echo "== uname"; uname -a; echo "== nproc"; nproc
  echo "== lscpu"; lscpu; echo "== free"; free -g; echo "== df /dev/shm"; df -h /dev/shm
  echo "== mpirun"; mpirun --version; echo "== ompi_info btl"; ompi_info | grep -i "btl\|pml"
  echo "== python"; python3 --version
  echo "== sha256 $BUNDLE"; sha256sum $BUNDLE/*; } > $R/device_info.txt 2>&1
mpicxx -O3 -DNDEBUG -std=c++17 -DOMPI_SKIP_MPICXX=1 -o /tmp/mpi-bench bench/mpi_bench.cpp > $R/mpicxx.txt 2>&1
echo "mpicxx rc=$?" >> $R/mpicxx.txt
SZ=${SZ:-"-b 4 -e 64M -f 4 -n 20"}; N16=${N16:-16}; N4=${N4:-4}; SZ4=${SZ4:-"-b 64M -e 64M -n 20"}
run_one() { # round name
  local f=$R/round$1_$2.txt s
  if [ "$(el)" -gt 470 ]; then echo "skipped (time budget) at $(el) s" > $f; pack; return; fi
  s=$(date +%s%N)
  case $2 in
    mccl)     MCCL_TRANSPORT=auto python3 tools/mcclrun -n $N16 --timeout 150 -- $BUNDLE/mccl-bench $SZ ;;
    mccltcp)  MCCL_TRANSPORT=tcp  python3 tools/mcclrun -n $N16 --timeout 150 -- $BUNDLE/mccl-bench $SZ ;;
    mpism)    MPI_BENCH=/tmp/mpi-bench MPI_BENCH_TIMEOUT=150 bash bench/run_mpi_bench.sh $N16 sm  $SZ ;;
    mpitcp)   MPI_BENCH=/tmp/mpi-bench MPI_BENCH_TIMEOUT=150 bash bench/run_mpi_bench.sh $N16 tcp $SZ ;;
    mccl4)    MCCL_TRANSPORT=auto python3 tools/mcclrun -n $N4 --timeout 60 -- $BUNDLE/mccl-bench $SZ4 ;;
    mpism4)   MPI_BENCH=/tmp/mpi-bench MPI_BENCH_TIMEOUT=60 bash bench/run_mpi_bench.sh $N4 sm $SZ4 ;;
  esac > $f 2>&1
  echo "# rc=$? wall_ms=$(( ($(date +%s%N) - s) / 1000000 )) t=$(el)" >> $f
  echo "round$1 $2: $(tail -1 $f)"; pack
}
shmcheck() { # sample the memfd rings of running mccl ranks
  for i in 1 2 3; do sleep 2; for p in $(pgrep -f $BUNDLE/mccl-bench); do echo "$1 t=$((2*i))s pid $p $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | cut -c1-40) memfd-maps $(grep -c mccl-shm /proc/$p/maps 2>/dev/null)"; done; done >> $R/shmcheck.txt
}
# shmcheck counts mccl-shm memfd mappings: with auto, 15 pair segments + 1 board per rank.
# SCHED: rounds as "N:name,name,...;" (default: rounds 1-3); the first mccl and
# mccltcp run of the schedule is sampled for the ranks' shm mappings.
SCHED=${SCHED:-"1:mccl,mccltcp,mpism,mpitcp,mccl4,mpism4;2:mccltcp,mpism,mpitcp,mccl,mpism4,mccl4;3:mpism,mpitcp,mccl,mccltcp,mccl4,mpism4"}
sampled=""
IFS=';' read -ra ROUNDS <<< "$SCHED"
for rd in "${ROUNDS[@]}"; do
  n=${rd%%:*}; IFS=',' read -ra NAMES <<< "${rd#*:}"
  for nm in "${NAMES[@]}"; do
    bg=""
    if [[ ($nm == mccl || $nm == mccltcp) && $sampled != *"<$nm>"* ]]; then
      shmcheck "round$n-$nm" & bg=$!; sampled+="<$nm>"
    fi
    run_one "$n" "$nm"
    [[ -n $bg ]] && wait $bg
  done
done
echo "total $(el) s"; pack
