#!/usr/bin/env bash
# Proves the installed package works for an embedder: install mccl into a
# temporary prefix, build examples/embed with find_package(mccl), run it.
set -euo pipefail
build_dir=$1
source_dir=$2
python=$3   # MCCL_PYTHON: the interpreter the package was built for
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
# The C API needs only the installed header and library: a C compiler, no
# C++ flags, no CMake.
cc -std=c11 -Wall -Werror -I"$work/prefix/include" "$source_dir/examples/allreduce_c.c" \
   -L"$work/prefix/lib" -lmccl -o "$work/allreduce_c"
env -u RANK -u WORLD_SIZE LD_LIBRARY_PATH="$work/prefix/lib" "$work/allreduce_c" | grep -q "rank 0 of 1"
# The Python package: importable from the prefix alone, loading the
# installed libmccl (not the build tree's), with the numpy API working, and
# the torch backend registered when it was built.
if [[ -f "$build_dir/python/mccl/__init__.py" ]]; then
  pkg=$(find "$work/prefix" -type d -path '*-packages/mccl' | head -n 1)
  [[ -n "$pkg" ]] || { echo "the Python package mccl was built but cmake --install left it out"; exit 1; }
  torch_built=0
  compgen -G "$build_dir/python/mccl/_C*.so" >/dev/null && torch_built=1
  env -u PYTHONPATH -u LD_LIBRARY_PATH "$python" - "$(dirname "$pkg")" "$work/prefix" "$torch_built" <<'PY'
import sys
site, prefix, torch_built = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
sys.path.insert(0, site)
import numpy as np
import mccl
from mccl import distributed as md
assert mccl.__file__.startswith(prefix), mccl.__file__
assert mccl.TORCH_BACKEND == torch_built, (mccl.TORCH_BACKEND, torch_built)
assert md.all_sum(np.ones(3, np.float32)).tolist() == [1.0, 1.0, 1.0]
libs = [l.split()[-1] for l in open("/proc/self/maps") if "libmccl.so" in l]
assert libs and all(l.startswith(prefix) for l in libs), libs
print("python package mccl imported from", site)
PY
fi
echo "find_package(mccl) consumer built and ran"
