#!/usr/bin/env bash
# `pip install .` as a user runs it, into two fresh virtual environments,
# with the wheel's CMake run pointed at this build tree (MCCL_PREBUILT) so
# that libmccl is linked, not compiled a second time:
#   1. a venv that sees the interpreter's packages (--system-site-packages,
#      so its torch): the package with the torch backend built against that
#      torch; import mccl registers it; two ranks all-reduce through
#      torch.distributed, started by the installed mcclrun script; a torch of
#      another release is refused at import naming both versions;
#   2. a plain venv, no torch: the build says the backend is not built, and
#      the numpy API works.
# Each step's output is kept in the work folder and printed when it fails.
# The work folder lies in the build tree and is removed at the start and at
# the end (a run killed by ctest's timeout leaves it for the next one).
#
#   pip_install_test.sh BUILD_DIR SOURCE_DIR PYTHON
set -euo pipefail
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
python=$3
work="$build_dir/tests/package/pip_install"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
# pip and scikit-build-core make their temporary build folders here too.
export TMPDIR="$work"
unset PYTHONPATH LD_LIBRARY_PATH PIP_REQUIRE_VIRTUALENV
cd "$work"

step() { printf '==> [%ds] %s\n' "$SECONDS" "$*"; }
# run LOG cmd...: the command's output goes to LOG, printed if it fails.
run() {
  local log=$1; shift
  if ! "$@" > "$log" 2>&1; then
    echo "failed: $*"; cat "$log"; exit 1
  fi
}

if ! "$python" -m venv --help > /dev/null 2>&1; then
  echo "SKIP: $python has no venv module"; exit 77
fi
# pip fetches scikit-build-core (the build requirement) and, for the plain
# venv, numpy from the package index, as for any user.
if ! "$python" -m pip download --no-deps --quiet -d "$work/probe" "scikit-build-core>=0.10" > "$work/probe.log" 2>&1; then
  echo "SKIP: pip cannot reach a package index with scikit-build-core:"; cat "$work/probe.log"; exit 77
fi

prebuilt="--config-settings=cmake.define.MCCL_PREBUILT=$build_dir"
torch_built=0
compgen -G "$build_dir/python/mccl/_C*.so" > /dev/null && torch_built=1

step "venv with the interpreter's packages"
run "$work/venv-torch.log" "$python" -m venv --system-site-packages "$work/venv-torch"
vpy="$work/venv-torch/bin/python"
run "$work/pip-torch.log" "$vpy" -m pip install -v "$prebuilt" "$source_dir"
grep -E "mccl: (PyTorch backend|Python package only)" "$work/pip-torch.log" || true
"$vpy" - "$work/venv-torch" "$torch_built" <<'PY'
import sys
venv, torch_built = sys.argv[1], sys.argv[2] == "1"
import numpy as np
import mccl
from mccl import distributed as md
assert mccl.__file__.startswith(venv), mccl.__file__
assert mccl.TORCH_BACKEND == torch_built, (mccl.TORCH_BACKEND, torch_built)
assert md.all_sum(np.ones(3, np.float32)).tolist() == [1.0, 1.0, 1.0]
# The library the package loads is the copy inside it, not the build tree's.
libs = {l.split()[-1] for l in open("/proc/self/maps") if "libmccl.so" in l}
assert libs and all(l.startswith(venv) for l in libs), libs
print("venv-torch: import mccl from", mccl.__file__, "backend:", mccl.TORCH_BACKEND)
PY
test -x "$work/venv-torch/bin/mcclrun"

if [[ $torch_built == 1 ]]; then
  step "two ranks through torch.distributed, started by the installed mcclrun"
  cat > "$work/allreduce.py" <<'PY'
import torch, torch.distributed as dist
import mccl
dist.init_process_group("mccl", init_method="env://")
t = torch.full((5,), float(dist.get_rank() + 1))
dist.all_reduce(t)
assert t.tolist() == [3.0] * 5, t
if dist.get_rank() == 0:
    print("allreduce over backend mccl:", t.tolist())
dist.destroy_process_group()
PY
  run "$work/ranks.log" "$work/venv-torch/bin/mcclrun" -n 2 --timeout 120 -- "$vpy" "$work/allreduce.py"
  grep "allreduce over backend mccl" "$work/ranks.log"

  step "a torch of another release is refused at import"
  build_info=$(find "$work/venv-torch" -name _torch_build.py -path '*mccl*')
  cp "$build_info" "$work/_torch_build.py.orig"
  echo 'TORCH_VERSION = "2.4.1"' > "$build_info"
  "$vpy" - <<'PY'
import torch
try:
    import mccl  # noqa: F401
except Exception as e:
    text = str(e)
    assert type(e).__name__ == "UnsupportedError", type(e)
    assert "2.4.1" in text and torch.__version__ in text, text
    print("refused:", text)
else:
    raise SystemExit("import mccl accepted an extension built for torch 2.4.1")
PY
  cp "$work/_torch_build.py.orig" "$build_info"
fi

step "plain venv, no torch"
run "$work/venv-plain.log" "$python" -m venv "$work/venv-plain"
ppy="$work/venv-plain/bin/python"
run "$work/pip-plain.log" "$ppy" -m pip install -v "$prebuilt" "$source_dir"
grep -q "mccl: PyTorch backend not built" "$work/pip-plain.log" ||
  { echo "the build without torch did not say the backend is not built"; cat "$work/pip-plain.log"; exit 1; }
grep -m1 -A2 "mccl: PyTorch backend not built" "$work/pip-plain.log"
"$ppy" - "$work/venv-plain" <<'PY'
import importlib.util, os, sys
venv = sys.argv[1]
assert importlib.util.find_spec("torch") is None, "torch is visible in the plain venv"
import numpy as np
import mccl
from mccl import distributed as md
assert mccl.__file__.startswith(venv), mccl.__file__
assert not mccl.TORCH_BACKEND
pkg = os.path.dirname(mccl.__file__)
assert not [f for f in os.listdir(pkg) if f.startswith("_C")], os.listdir(pkg)
assert md.all_sum(np.arange(4, dtype=np.float32)).tolist() == [0.0, 1.0, 2.0, 3.0]
print("venv-plain: the numpy API alone, from", mccl.__file__)
PY
step "pip install . passed in both environments"
