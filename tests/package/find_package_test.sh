#!/usr/bin/env bash
# Proves the installed package works for an embedder: install mccl into a
# temporary prefix, build examples/embed with find_package(mccl), run it.
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$source_dir/examples/embed" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log" \
  || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j 2 > "$work/build.log" || { cat "$work/build.log"; exit 1; }
# A group of one (no RANK/WORLD_SIZE): the allreduce is a local no-op.
env -u RANK -u WORLD_SIZE LD_LIBRARY_PATH="$work/prefix/lib" "$work/build/embed_example"
test -x "$work/prefix/bin/mcclrun"
echo "find_package(mccl) consumer built and ran"
