#!/usr/bin/env bash
# mccl developer entry point; the README's commands and CI both go through it,
# so "works on my machine" and "works in CI" mean the same steps.
#
#   tools/dev.sh build [cmake --build args...]
#   tools/dev.sh demo  [mccl-bench args...]     MCCL_DEMO_RANKS ranks (default 4)
#   tools/dev.sh test  [ctest args...]          e.g. -L unit, -j2
#
# MCCL_BUILD_DIR selects the build tree (default <repo>/build).
set -euo pipefail

# Debian packages a fresh machine needs; extend here, nowhere else.
REQUIRED_PACKAGES=(
  build-essential cmake pkg-config
  libcaf-dev libboost-dev libisal-dev libibverbs-dev libhwy-dev
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  python3
  # The PyTorch backend (python/) and its tests; examples plot with matplotlib.
  python3-torch libtorch-dev pybind11-dev python3-matplotlib
)

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${MCCL_BUILD_DIR:-$REPO_ROOT/build}"
case "$BUILD_DIR" in
  /*) ;;
  *) BUILD_DIR="$PWD/$BUILD_DIR" ;;
esac

step() { printf '==> %s\n' "$*"; }
die() { printf 'dev.sh: %s\n' "$*" >&2; exit 1; }

usage() {
  sed -n '5,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
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

configure() {
  # A cache without a generated build system means the last configure failed.
  if [[ -f "$BUILD_DIR/CMakeCache.txt" &&
        ( -f "$BUILD_DIR/Makefile" || -f "$BUILD_DIR/build.ninja" ) ]]; then
    return 0   # cmake --build re-runs configure itself when CMakeLists change
  fi
  step "configuring $BUILD_DIR"
  cmake -S "$REPO_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
}

build() {
  ensure_packages
  configure
  step "building"
  cmake --build "$BUILD_DIR" -j "$(nproc)" "$@"
}

demo() {
  build
  local bench="$BUILD_DIR/bench/mccl-bench"
  [[ -x "$bench" ]] || die "$bench was not built (is MCCL_BUILD_BENCH off?)"
  local ranks="${MCCL_DEMO_RANKS:-4}"
  step "demo: mccl-bench on $ranks ranks"
  # Through python3 rather than the shebang so a checkout without the
  # executable bit still works.
  python3 "$REPO_ROOT/tools/mcclrun" -n "$ranks" -- "$bench" "$@"
}

run_tests() {
  build
  step "testing"
  ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 600 "$@"
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
