#!/usr/bin/env bash
# mccl developer entry point; the README's commands and CI both go through it,
# so "works on my machine" and "works in CI" mean the same steps.
#
#   tools/dev.sh build [cmake --build args...]
#   tools/dev.sh demo  [mccl-bench args...]     MCCL_DEMO_RANKS ranks (default 4)
#   tools/dev.sh test  [ctest args...]          e.g. -L unit, -j2
#
# MCCL_BUILD_DIR selects the build tree (default <repo>/build). `test` without
# ctest arguments also runs the hardening stages: a smaller suite built with
# AddressSanitizer and UndefinedBehaviorSanitizer (<build>-asan) and the
# libFuzzer targets for DEV_FUZZ_SECONDS each (<build>-fuzz); DEV_SANITIZERS=0
# or DEV_FUZZ_SECONDS=0 skips one.
set -euo pipefail

# Debian packages a fresh machine needs; extend here, nowhere else.
REQUIRED_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libcaf-dev libboost-dev libisal-dev libibverbs-dev libhwy-dev
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  python3
  # mcclrun --hosts and the emulated hosts of the multi-host tests
  openssh-client openssh-server
  # libFuzzer targets of the wire decoders (tests/fuzz): clang and its runtimes
  clang-14 libclang-rt-14-dev
  # network namespaces, tc shaping and DROP rules (multi-host and partition tests)
  iproute2 iptables
  # the Python headers the torch extension compiles against come with the
  # python3 first on PATH (pyenv, venv) or, for Debian's, python3-dev
)

# Python packages for the python3 first on PATH, the interpreter the package,
# the torch backend, the tools and the tests are built for and run with
# (CMake's MCCL_PYTHON). numpy: mccl.distributed; torch: the backend (2.13 is
# the release tested; a torch 2.4 or newer already installed is kept);
# matplotlib: the examples' plots; ml_dtypes: numpy bfloat16 arrays for
# mccl.distributed (and its test); expecttest: PyTorch's own distributed test
# suite, which imports it (tests/python/torch_suite). Extend here, nowhere else.
PYTHON_PACKAGES=(numpy matplotlib ml_dtypes expecttest)
TORCH_REQUIREMENT="torch==2.13.0"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${MCCL_BUILD_DIR:-$REPO_ROOT/build}"
DEMO_RANKS="${MCCL_DEMO_RANKS:-4}"
# Those two are this script's, not mccl's: a rank that finds an MCCL_
# variable it does not know refuses to start (a misspelt setting is an
# error, not a default), so they stop here, before any rank or test.
unset MCCL_BUILD_DIR MCCL_DEMO_RANKS
case "$BUILD_DIR" in
  /*) ;;
  *) BUILD_DIR="$PWD/$BUILD_DIR" ;;
esac

# Each step line says how long the command has run (m:ss): where CI's time goes.
step() { printf '==> [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }
die() { printf 'dev.sh: %s\n' "$*" >&2; exit 1; }

usage() {
  sed -n '5,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

missing_packages() {
  local pkg
  for pkg in "${REQUIRED_PACKAGES[@]}"; do
    if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" != "install ok installed" ]]; then
      printf '%s\n' "$pkg"
    fi
  done
}

ensure_packages() {
  step "checking packages"
  if ! command -v dpkg-query >/dev/null 2>&1; then
    printf 'dev.sh: not a Debian system; make sure these are installed: %s\n' \
      "${REQUIRED_PACKAGES[*]}" >&2
    return 0
  fi
  local missing
  missing="$(missing_packages)"
  [[ -z "$missing" ]] && return 0
  # Word splitting is wanted: package names contain no spaces.
  # shellcheck disable=SC2206
  local -a pkgs=($missing)
  if [[ "$(id -u)" -ne 0 ]]; then
    printf 'dev.sh: missing packages; install them with:\n  sudo apt-get install -y %s\n' \
      "${pkgs[*]}" >&2
    exit 1
  fi
  step "installing ${pkgs[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}"
}

# The pip spec of each Python package python3 lacks, one a line.
missing_python_packages() {
  local pkg
  for pkg in "${PYTHON_PACKAGES[@]}"; do
    python3 -c "import $pkg" >/dev/null 2>&1 || printf '%s\n' "$pkg"
  done
  # A torch of 2.4 or newer stays (it is the user's); an older one, or none,
  # gets the tested release.
  python3 - <<'PY' >/dev/null 2>&1 || printf '%s\n' "$TORCH_REQUIREMENT"
import torch, sys
major, minor = (int(x) for x in torch.__version__.split(".")[:2])
sys.exit(0 if (major, minor) >= (2, 4) else 1)
PY
}

ensure_python_packages() {
  step "checking Python packages of $(command -v python3 || echo 'python3 (missing)')"
  command -v python3 >/dev/null 2>&1 || die "no python3 on PATH (Debian: apt-get install python3)"
  local missing
  missing="$(missing_python_packages)"
  [[ -z "$missing" ]] && return 0
  # shellcheck disable=SC2206
  local -a pkgs=($missing)
  step "pip installing ${pkgs[*]}"
  # Debian's own interpreter refuses pip (PEP 668): say what to do instead.
  if ! python3 -m pip install --disable-pip-version-check "${pkgs[@]}"; then
    die "pip could not install ${pkgs[*]} for $(command -v python3); install them with
  python3 -m pip install ${pkgs[*]}
or put a virtual environment's python3 first on PATH (python3 -m venv ~/mccl-venv && . ~/mccl-venv/bin/activate)"
  fi
}

# The generator for a tree at $1: the one its cache names (cmake refuses
# another), else Ninja. Ninja compiles a target's sources while the
# libraries it links are still being built, where Makefiles wait for them:
# with 2 vCPUs a fresh Release build took 2 m 58 s instead of 3 m 39 s and
# the sanitizer build 3 m 01 s instead of 3 m 43 s. Without ninja on PATH
# (a system that is not Debian, where the package check only warns),
# Makefiles, and it says so.
generator_for() {
  local cached
  cached="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$1/CMakeCache.txt" 2>/dev/null || true)"
  if [[ -n "$cached" ]]; then
    printf '%s\n' "$cached"
  elif command -v ninja >/dev/null 2>&1; then
    printf 'Ninja\n'
  else
    printf 'dev.sh: ninja not found; configuring %s with Unix Makefiles (slower from scratch)\n' "$1" >&2
    printf 'Unix Makefiles\n'
  fi
}

configure() {
  # A cache without a generated build system means the last configure failed.
  if [[ -f "$BUILD_DIR/CMakeCache.txt" &&
        ( -f "$BUILD_DIR/Makefile" || -f "$BUILD_DIR/build.ninja" ) ]]; then
    return 0   # cmake --build re-runs configure itself when CMakeLists change
  fi
  step "configuring $BUILD_DIR"
  # Unity build: each compiler run takes up to 8 source files, so the heavy
  # headers (CAF, Asio, gtest, torch) are parsed once per batch: a fresh
  # Release build took 4 m 26 s instead of 6 m 42 s on 2 vCPUs. A tree of
  # your own without it (plain cmake) rebuilds less after a one-file edit.
  cmake -S "$REPO_ROOT" -B "$BUILD_DIR" -G "$(generator_for "$BUILD_DIR")" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON
}

build() {
  ensure_packages
  ensure_python_packages
  configure
  step "building"
  cmake --build "$BUILD_DIR" -j "$(nproc)" "$@"
}

demo() {
  build
  local bench="$BUILD_DIR/bench/mccl-bench"
  [[ -x "$bench" ]] || die "$bench was not built (is MCCL_BUILD_BENCH off?)"
  local ranks="$DEMO_RANKS"
  step "demo: mccl-bench on $ranks ranks"
  # Through python3 rather than the shebang so a checkout without the
  # executable bit still works.
  python3 "$REPO_ROOT/tools/mcclrun" -n "$ranks" -- "$bench" "$@"
}

run_tests() {
  build
  step "testing"
  # Two at a time: many tests mostly wait (peers, deadlines), so this about
  # halves the wall time on 2 cores; every test has its own hard timeout.
  ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 600 -j "$(nproc)" "$@"
  # With ctest arguments the caller picked tests of the main build only.
  [[ $# -gt 0 ]] && return 0
  sanitizer_tests
  fuzz_tests
  step "every stage passed"
}

# The unit, actor and in-process tests and a few multi-process ones (label
# "sanitized", tests/multiproc/CMakeLists.txt), built with ASan and UBSan.
# Conformance (every op x dtype x world) is left out to keep CI short; the
# multi-process subset covers real sockets and kills.
SANITIZER_TARGETS=(mccl_unit_tests mccl_actor_tests mccl_integration_tests mccl_ops_tests
                   mccl_caller_driven_tests mccl_op_thread_tests mccl_shrink_tests mccl_fault_injection_tests
                   mccl_compression_tests mccl_actor_traffic_tests mccl_op_actor_supervision_tests
                   mccl_check mccl_recovery mccl_c_api_test)

sanitizer_tests() {
  [[ "${DEV_SANITIZERS:-1}" == 0 ]] && { step "sanitizers skipped (DEV_SANITIZERS=0)"; return 0; }
  local dir="$BUILD_DIR-asan"
  step "sanitizers: building $dir (address,undefined)"
  if [[ ! -f "$dir/CMakeCache.txt" ]]; then
    # -O1: sanitizer builds at -O3 compile about twice as long for little
    # gain in test time (the usual choice for ASan runs). A build type of
    # our own, so that neither CMakeLists.txt's default (Release) nor a
    # standard type adds its flags (-O3 -DNDEBUG) after ours. clang (here
    # for the fuzzers anyway) rather than g++: instrumented, it compiled
    # these targets in 770 s of CPU where g++ had taken 1777 s for 89 of
    # their 107 files (both measured on 2 busy vCPUs; the CAF-heavy files
    # 1.4-2.3x faster each).
    CC=clang-14 CXX=clang++-14 \
    cmake -S "$REPO_ROOT" -B "$dir" -G "$(generator_for "$dir")" -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS=-O1 \
      -DMCCL_SANITIZE=address,undefined -DMCCL_BUILD_BENCH=OFF -DMCCL_BUILD_EXAMPLES=OFF \
      -DCMAKE_UNITY_BUILD=ON
  fi
  cmake --build "$dir" -j "$(nproc)" --target "${SANITIZER_TARGETS[@]}"
  step "sanitizers: testing"
  # Any report fails the test: UBSan halts at the first finding; the two
  # suppressions are known-harmless reports inside CAF's headers.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$REPO_ROOT/tests/sanitizers/ubsan.supp"
  export LSAN_OPTIONS="suppressions=$REPO_ROOT/tests/sanitizers/lsan.supp"
  ctest --test-dir "$dir" --output-on-failure --timeout 600 -j "$(nproc)" -L 'unit|integration|sanitized' \
        -E 'conformance|NOT_BUILT'
  unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
}

fuzz_tests() {
  local seconds="${DEV_FUZZ_SECONDS:-20}"
  [[ "$seconds" == 0 ]] && { step "fuzzing skipped (DEV_FUZZ_SECONDS=0)"; return 0; }
  local dir="$BUILD_DIR-fuzz"
  step "fuzzing: building $dir (clang++-14, libFuzzer)"
  cmake -S "$REPO_ROOT/tests/fuzz" -B "$dir" -G "$(generator_for "$dir")" -DCMAKE_CXX_COMPILER=clang++-14 \
    -DMCCL_FUZZ_SECONDS="$seconds" >/dev/null
  cmake --build "$dir" -j "$(nproc)"
  step "fuzzing: each target for $seconds s"
  # The targets at once, one a core: each still fuzzes for its full time.
  ctest --test-dir "$dir" --output-on-failure -j "$(nproc)"
}

main() {
  local cmd="${1:-}"
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    build) build "$@" ;;
    demo) demo "$@" ;;
    test) run_tests "$@" ;;
    -h|--help|help) usage ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
