#!/usr/bin/env python3
"""Runs the short shell commands of README.md, docs/ and bench/README.md.

Every command of a ```sh block is either run (RUN: no network, no other
host, no root, no multi-rank job, seconds at most) or left out for a reason
(SKIP); a command that matches neither fails the test, so a new command in
the docs gets a decision. Commands run in a scratch folder that links the
checkout's top-level entries and `build` to the build tree, so `build/...`
paths work whatever the build directory is called. docs/testing.md, "The
commands in these docs", says the same for readers.

    python3 tests/docs/docs_commands_test.py --root . --build build [--list]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

# (pattern, what the command needs from the build tree or None)
RUN = [
    (r"^tools/(mcclrun|mccl-topo|mcclstatus|mccl-trace|mcclfaults) --help$", None),
    (r"^build/bench/mccl-bench --help$", "bench/mccl-bench"),
    (r"^build/tools/mccl-docgen (settings|errors)$", "tools/mccl-docgen"),
    (r"^python3 scripts/generated_docs\.py --check$", "tools/mccl-docgen"),
    (r"^build/tools/mccl-sim --ranks 64 .*", "tools/mccl-sim"),
]

# (pattern, why it is not run)
SKIP = [
    (r"^tools/dev\.sh ", "installs packages and builds: it is what runs this test"),
    (r"^MCCL_DEMO_RANKS=", "the demo: a multi-rank job after a build"),
    (r"--hosts?\b|--hostfile|node1|\bssh\b", "needs other hosts reachable over ssh"),
    (r"^sudo |netns|shaped_hosts", "needs root (network namespaces)"),
    (r"(^|\s)(tools/)?mcclrun -n|python3 tools/mcclrun|\bmcclrun\b.*-- ", "a multi-rank job"),
    (r"^RANK=", "one rank of a multi-rank job started by hand"),
    (r"torchrun|train\.py|\./train", "a fragment: stands for your own program"),
    (r"^(PYTHONPATH=\S+ )?python3 (-c \"import mccl\"|examples/)", "needs the Python package and torch built (tools/dev.sh builds them)"),
    (r"^export PYTHONPATH", "sets up the shell for the next command"),
    (r"^cmake --install|^cc -std=c11", "installs into a prefix, or builds against an installed mccl"),
    (r"^cmake -S |^cmake --build ", "configures and builds mccl: minutes (the build this test runs in did)"),
    (r"^pip install ", "builds mccl into the environment: minutes (package_pip_install runs it in fresh venvs)"),
    (r"^python -c \"import mccl", "needs the package that pip install . installs"),
    (r"bench/(compare|before_after|engine_targets)\.py|run_mpi_bench|sweep_algorithms|benchmark_matrix|torch_ddp_throughput",
     "a benchmark: minutes, and Open MPI or Gloo for the peers"),
    (r"bench/actors_ab\.sh", "an A/B benchmark: minutes, and a build of the reference commit"),
    (r"scaling_rounds|scaling_table|device_bundle|build_torch_ext|BUNDLE=|bench/latency_16|bench/busbw_16|single_copy|device_rounds|device_table|broadcast_rounds",
     "a benchmark round for the 16-core machine"),
    (r"sim_table\.py|mccl-sim --ranks (256|1024)|/usr/bin/time", "a large simulation: minutes and gigabytes"),
    (r"bench/host_memory\.sh", "measures the memory of the machine it runs on: half a minute with all its cores busy"),
    (r"bench/slow_mode_probe\.sh", "a benchmark for a many-core machine: many spinning processes, and 64-rank jobs"),
    (r"sweeps/medians\.py", "reads the raw sweep outputs, which live in the history"),
    (r"^build/bench/mccl-reduce-bench", "a benchmark: minutes"),
    (r"^cat /tmp/", "reads what the command before it wrote"),
    (r"^for r in|^done$|^  RANK=|^    build/bench", "ranks started by hand: a multi-rank job"),
    (r"^MCCL_SPIN_US=|^NS=", "a benchmark: minutes"),
    (r"^tools/mcclstatus --port", "asks the ranks of a running job"),
    (r"^python3 bench/", "a benchmark: minutes"),
    (r"^(PYTHONPATH=\S+ )?python3 tests/python/torch_suite/run_suite\.py",
     "PyTorch's distributed suite: hundreds of multi-rank tests, minutes"),
]


def commands(path):
    """(line number, command) for every command line of the ```sh blocks;
    backslash continuations joined, comments and blank lines dropped."""
    out, in_sh, pending, start = [], False, "", 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            stripped = line.rstrip("\n")
            if stripped.strip().startswith("```"):
                in_sh = not in_sh and stripped.strip() in ("```sh", "```bash")
                continue
            if not in_sh:
                continue
            if not pending:
                start = n
            if stripped.rstrip().endswith("\\"):
                pending += stripped.rstrip()[:-1].strip() + " "
                continue
            cmd = (pending + stripped.strip()).strip()
            pending = ""
            cmd = re.sub(r"\s+#\s.*$", "", cmd).strip()  # a trailing comment
            if cmd and not cmd.startswith("#"):
                out.append((start, cmd))
    return out


def classify(cmd):
    for pattern, need in RUN:
        if re.search(pattern, cmd):
            return "run", need
    for pattern, why in SKIP:
        if re.search(pattern, cmd):
            return "skip", why
    return None, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--list", action="store_true", help="only say what would run and why the rest would not")
    args = ap.parse_args()
    root, build = os.path.abspath(args.root), os.path.abspath(args.build)
    pages = [os.path.join(root, "README.md"), os.path.join(root, "bench", "README.md")]
    pages += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    failures, ran, skipped = [], 0, 0
    scratch = tempfile.mkdtemp(prefix="mccl-docs-")
    try:
        for entry in os.listdir(root):
            if entry not in ("build", ".git"):
                os.symlink(os.path.join(root, entry), os.path.join(scratch, entry))
        os.symlink(build, os.path.join(scratch, "build"))
        for page in pages:
            rel = os.path.relpath(page, root)
            for line, cmd in commands(page):
                kind, detail = classify(cmd)
                where = f"{rel}:{line}: {cmd}"
                if kind is None:
                    failures.append(f"{where}\n    neither run nor skipped: add it to RUN or SKIP in {__file__}")
                    continue
                if kind == "skip":
                    skipped += 1
                    print(f"skip  {where}\n      ({detail})")
                    continue
                if detail and not os.path.exists(os.path.join(build, detail)):
                    failures.append(f"{where}\n    build/{detail} is missing: build it first")
                    continue
                if args.list:
                    print(f"run   {where}")
                    continue
                result = subprocess.run(["bash", "-c", cmd], cwd=scratch, capture_output=True,
                                        text=True, timeout=120)
                ran += 1
                status = "ok" if result.returncode == 0 else f"exit {result.returncode}"
                print(f"run   {where}: {status}")
                if result.returncode != 0:
                    failures.append(f"{where}\n    exit {result.returncode}\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\ndocs_commands: {ran} run, {skipped} left out (reasons above), {len(failures)} failed")
    for failure in failures:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
