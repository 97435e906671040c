#!/usr/bin/env python3
"""Runs PyTorch's distributed test suite (the one the torch wheel ships:
torch.testing._internal.distributed.distributed_test) for gloo or mccl, as
PyTorch's run_test.py runs test_distributed_spawn.py for gloo, and counts.

    python3 tests/python/torch_suite/run_suite.py --backend gloo
    python3 tests/python/torch_suite/run_suite.py --backend mccl --json /tmp/mccl.json
    python3 tests/python/torch_suite/run_suite.py --backend mccl --disguise-as gloo
    python3 tests/python/torch_suite/run_suite.py --backend mccl \
        --tests tests/python/torch_suite/ci_subset.txt --require-pass

Each test starts --world-size ranks (default 3: what run_test.py gives gloo
on a machine without GPUs) that rendezvous through a file:// store, as
TestDistBackend does: forks of one server that imported the suite once
(--start forkserver, the default: the same tests, tens of minutes faster
on 2 cores), or fresh interpreters (--start spawn, PyTorch's way). --disguise-as gloo runs the tests the suite
gates on gloo's name over mccl (suite.py says how).

The closing lines give passed, failed, skipped and errors (an error: what
went wrong around a test, not in its ranks), each failure's first line, and
the skip reasons with their counts; --json writes every test's outcome,
reason and seconds. --require-pass (the CI subsets): every selected test
must pass, a skip fails too. --deadline bounds the whole run: past it every
rank is killed and the run fails; ranks die with the runner whatever ends
it (suite.py).

`import mccl` finds the package through PYTHONPATH (ctest sets it to the
build's python/ directory), else in ../../../build/python. The suite needs
the expecttest package (tools/dev.sh installs it).
"""

import argparse
import atexit
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", required=True, choices=("gloo", "mccl"))
    ap.add_argument("--disguise-as", choices=("gloo",),
                    help="with --backend mccl: the suite believes it runs this backend (its tests, "
                         "skips and branches are gloo's) while mccl makes every process group; "
                         "shows what the tests the suite gates on gloo's name do over mccl (suite.py)")
    ap.add_argument("--world-size", type=int, default=3,
                    help="ranks per test (default 3, as PyTorch runs gloo without GPUs)")
    ap.add_argument("--start", choices=("forkserver", "spawn"), default="forkserver",
                    help="how ranks start: forks of one server that imported the suite once (forkserver, "
                         "the default: a second or so a test) or a fresh interpreter each (spawn, as "
                         "PyTorch runs the suite: seconds of CPU per rank to import torch)")
    ap.add_argument("--tests", metavar="FILE",
                    help="run only the tests named in FILE (one a line; # starts a comment)")
    ap.add_argument("-k", dest="patterns", action="append", default=[],
                    help="run only tests whose name contains this (repeatable)")
    ap.add_argument("names", nargs="*", help="run only these tests (test_ names)")
    ap.add_argument("--timeout", type=int, default=300,
                    help="seconds one test's ranks may run before they are killed (PyTorch's default: 300)")
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds the whole run may take; then every rank is killed and the run fails")
    ap.add_argument("--json", metavar="FILE", help="write each test's outcome, reason and seconds here")
    ap.add_argument("--require-pass", action="store_true",
                    help="fail unless every selected test passes (skips fail too)")
    ap.add_argument("--list", action="store_true", help="print the selected tests and stop")
    ap.add_argument("-q", "--quiet", action="store_true", help="one character per test instead of a line")
    return ap.parse_args()


def set_environment(args):
    """What PyTorch's run_test.py sets for test_distributed_spawn.py, before
    the suite is imported (it reads BACKEND and WORLD_SIZE at import)."""
    temp = tempfile.mkdtemp(prefix=f"mccl-torch-suite-{args.backend}-")
    os.mkdir(os.path.join(temp, "barrier"))
    os.mkdir(os.path.join(temp, "test_dir"))
    os.environ["BACKEND"] = args.backend
    os.environ["WORLD_SIZE"] = str(args.world_size)
    os.environ["TEMP_DIR"] = temp
    # Files the suite's tests make with tempfile (FileStores among them,
    # not all removed) go in this folder too, removed with it at the end.
    os.environ["TMPDIR"] = temp
    tempfile.tempdir = temp
    # run_test.py's "with init file" round (TestDistBackend rendezvouses
    # through a file of its own either way; the suite only asks whether
    # INIT_METHOD is file:// before re-initializing in a test).
    os.environ["INIT_METHOD"] = "file://" + os.path.join(temp, "shared_init_file")
    os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(args.timeout)
    if args.disguise_as:
        os.environ["BACKEND"] = args.disguise_as
        os.environ["TORCH_SUITE_GROUPS_ON"] = args.backend
    os.environ["TORCH_SUITE_START"] = args.start
    if args.backend == "mccl" and not os.environ.get("PYTHONPATH"):
        build_python = os.path.normpath(os.path.join(HERE, "..", "..", "..", "build", "python"))
        os.environ["PYTHONPATH"] = build_python
        sys.path.insert(0, build_python)
    # The ranks import suite.py by name: a forkserver does not take the
    # runner's sys.path (Python 3.11 drops it), so say it in PYTHONPATH.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p)
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    return temp


def selected_names(args, all_names):
    names = list(all_names)
    wanted = list(args.names)
    if args.tests:
        with open(args.tests, encoding="utf-8") as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    wanted.append(line)
    if wanted:
        unknown = sorted(set(wanted) - set(all_names))
        if unknown:
            sys.exit(f"run_suite: not in the suite: {', '.join(unknown)}")
        names = [n for n in names if n in set(wanted)]
    if args.patterns:
        names = [n for n in names if any(p in n for p in args.patterns)]
    return names


class CountingResult(unittest.TextTestResult):
    """Keeps each test's outcome, reason and wall time."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.outcomes = {}
        self._started = {}

    @staticmethod
    def _name(test):
        return test.id().split(".")[-1]

    def startTest(self, test):
        self._started[self._name(test)] = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, reason=""):
        name = self._name(test)
        seconds = time.monotonic() - self._started.get(name, time.monotonic())
        self.outcomes[name] = {"outcome": outcome, "reason": reason, "seconds": round(seconds, 2)}

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        # MultiProcessTestCase reports a rank's exception, or a timeout, as
        # an error of the test: count those as failures; errors are what
        # went wrong around a test (its set-up, the runner).
        text = self._exc_info_to_string(err, test)
        rank_failure = "exited with error code" in text or "timed out after" in text
        self._record(test, "failed" if rank_failure else "error", text)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", str(reason))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


def kill_ranks():
    """Every rank still alive (the spawned children of this process)."""
    import multiprocessing
    for child in multiprocessing.active_children():
        try:
            os.kill(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def first_line_of_error(text):
    """The line that says what went wrong in a traceback text."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for line in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Exit|Interrupt)\b", line) or "Error:" in line:
            return line[:300]
    return lines[-1][:300] if lines else ""


def summarize(label, world, outcomes, seconds):
    counts = {k: 0 for k in ("passed", "failed", "skipped", "error")}
    for o in outcomes.values():
        counts[o["outcome"]] += 1
    print()
    failed = sorted(n for n, o in outcomes.items() if o["outcome"] in ("failed", "error"))
    for name in failed:
        print(f"FAILED {name}: {first_line_of_error(outcomes[name]['reason'])}")
    reasons = {}
    for o in outcomes.values():
        if o["outcome"] == "skipped":
            reasons[o["reason"]] = reasons.get(o["reason"], 0) + 1
    if reasons:
        print("\nskip reasons:")
        for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
            print(f"  {n:4d}  {reason}")
    print(f"\n{label} (world size {world}), {len(outcomes)} tests in {seconds:.0f} s:")
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped, "
          f"{counts['error']} errors")
    return counts


def main():
    args = parse_args()
    if args.disguise_as and args.backend != "mccl":
        sys.exit("run_suite: --disguise-as is for --backend mccl")
    temp = set_environment(args)
    # The folder goes at exit, after multiprocessing's own exit handler
    # (atexit runs the last registered first, and multiprocessing, imported
    # with the suite below, registers later): that handler removes the
    # pymp-* folder multiprocessing made in it, and printed a traceback
    # when the folder had gone first.
    atexit.register(shutil.rmtree, temp, True)
    try:
        import suite  # noqa: E402  (reads the environment set above)
    except ModuleNotFoundError as e:
        if e.name != "expecttest":
            raise
        sys.exit(f"run_suite: PyTorch's test suite needs expecttest: {sys.executable} -m pip install "
                 "expecttest (tools/dev.sh installs it)")
    if args.start == "forkserver":
        import multiprocessing
        multiprocessing.set_forkserver_preload(["suite"])
    cls = suite.TestDistBackendWithSpawn
    names = selected_names(args, unittest.TestLoader().getTestCaseNames(cls))
    if args.list:
        print("\n".join(names))
        return 0
    if not names:
        sys.exit("run_suite: no test selected")

    def on_signal(signum, _frame):
        kill_ranks()
        sys.stderr.write(f"run_suite: stopped by signal {signum}; ranks killed\n")
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.deadline > 0:
        def past_deadline():
            kill_ranks()
            sys.stderr.write(f"run_suite: past the deadline of {args.deadline:.0f} s; ranks killed\n")
            sys.stderr.flush()
            os._exit(124)
        timer = threading.Timer(args.deadline, past_deadline)
        timer.daemon = True
        timer.start()

    tests = unittest.TestSuite(cls(n) for n in names)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=1 if args.quiet else 2,
                                     resultclass=CountingResult)
    start = time.monotonic()
    result = runner.run(tests)
    seconds = time.monotonic() - start
    kill_ranks()
    label = args.backend + (f" disguised as {args.disguise_as}" if args.disguise_as else "")
    counts = summarize(label, args.world_size, result.outcomes, seconds)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"backend": args.backend, "disguised_as": args.disguise_as,
                   "world_size": args.world_size,
                       "seconds": round(seconds, 1), "counts": counts,
                       "tests": result.outcomes}, f, indent=1, sort_keys=True)
    if counts["failed"] or counts["error"]:
        return 1
    if args.require_pass and counts["skipped"]:
        print("run_suite: --require-pass: skipped tests count as failures here")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
