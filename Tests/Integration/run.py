#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Runs the integration tests (Debian's /usr/bin/python3, which has python3-dbus and gi).

Usage: run.py --bin .build/debug [--bus dbus-daemon|broker] [-k pattern] [--skip module] [--only module]
             [--timed only|skip] [--jobs N]
Ends with a line 'N passed, N failed'.
"""
import argparse
import os
import sys
import time
import unittest

here = os.path.dirname(os.path.abspath(__file__))
parser = argparse.ArgumentParser()
parser.add_argument("--bin", default=".build/debug")
parser.add_argument("-k", dest="pattern", action="append", default=[])
parser.add_argument("--skip", action="append", default=[], help="leave out the tests of these modules")
parser.add_argument("--only", action="append", default=[], help="run the tests of these modules alone")
parser.add_argument("--timed", choices=["only", "skip"],
                    help="run only, or leave out, the classes that bound the agent's answer times (harness.timed)")
parser.add_argument("--bus", choices=["dbus-daemon", "broker"], default="dbus-daemon",
                    help="the private session bus each test starts (broker: dbus-broker)")
parser.add_argument("--jobs", type=int, default=1,
                    help="run the modules in this many processes at once (each module's output printed whole)")
args = parser.parse_args()
os.environ["NETACTIVITY_BIN"] = os.path.abspath(args.bin)
os.environ["NETACTIVITY_TEST_BUS"] = args.bus
sys.path.insert(0, here)
if args.bus == "broker":
    from harness import broker_usable
    if not broker_usable():
        print("dbus-broker: not run (needs root, dbus-broker and systemd-socket-activate)")
        print("0 passed, 0 failed, 0 skipped")
        sys.exit(0)
sys.path.insert(0, here)


def run_in_processes(jobs):
    """The modules, the largest first, in `jobs` processes of this script at once (each runs one
    module with the same options); prints each module's output whole when it ends, then the sum."""
    import re
    import subprocess
    import threading
    modules = sorted((f[:-3] for f in os.listdir(here) if f.startswith("test_") and f.endswith(".py")
                      and f[:-3] not in args.skip and (not args.only or f[:-3] in args.only)),
                     key=lambda m: -os.path.getsize(os.path.join(here, m + ".py")))
    base = [sys.executable, os.path.abspath(__file__), "--bin", args.bin, "--bus", args.bus]
    base += [a for p in args.pattern for a in ("-k", p)] + (["--timed", args.timed] if args.timed else [])
    lock = threading.Lock()
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    slowest = []
    ok = [True]

    def worker():
        while True:
            with lock:
                if not modules:
                    return
                module = modules.pop(0)
            started = time.monotonic()
            r = subprocess.run(base + ["--only", module], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, text=True)
            with lock:
                print("==== %s (%.0f s)" % (module, time.monotonic() - started))
                sys.stdout.write(r.stdout)
                sys.stdout.flush()
                last = re.search(r"^(\d+) passed, (\d+) failed, (\d+) skipped", r.stdout, re.M)
                counts = [int(n) for n in last.groups()] if last else [0, 1, 0]  # no summary: it broke
                for key, value in zip(("passed", "failed", "skipped"), counts):
                    totals[key] += value
                # A module whose every test was left out (--timed, -k) ran none: not a failure.
                if r.returncode != 0 and counts[:2] != [0, 0]:
                    ok[0] = False
                slowest.extend(re.findall(r"^slowest: +([\d.]+) s (.*)$", r.stdout, re.M))

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for seconds, name in sorted(slowest, key=lambda x: -float(x[0]))[:8]:
        print("slowest: %5.1f s %s" % (float(seconds), name))
    print("%d passed, %d failed, %d skipped" % (totals["passed"], totals["failed"], totals["skipped"]))
    sys.exit(0 if ok[0] and totals["failed"] == 0 and totals["passed"] > 0 else 1)


if args.jobs > 1:
    run_in_processes(args.jobs)

loader = unittest.TestLoader()
if args.pattern:
    loader.testNamePatterns = ["*%s*" % p for p in args.pattern]
suite = loader.discover(here, pattern="test_*.py", top_level_dir=here)
if args.skip or args.only or args.timed:
    def wanted(t):
        module = t.__class__.__module__
        if module == "unittest.loader":  # a module that failed to import: always shown
            return True
        if args.timed and getattr(t.__class__, "timed", False) != (args.timed == "only"):
            return False
        return module not in args.skip and (not args.only or module in args.only)

    def keep(s):
        if isinstance(s, unittest.TestSuite):
            return unittest.TestSuite(keep(t) for t in s if not isinstance(t, unittest.TestCase) or wanted(t))
        return s
    suite = keep(suite)
class TimedResult(unittest.TextTestResult):
    """Keeps each test's time, for the slowest ones' list at the end (where `make test`'s minutes go)."""
    times = []

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        TimedResult.times.append((time.monotonic() - self._started, test.id()))


result = unittest.TextTestRunner(verbosity=2, resultclass=TimedResult).run(suite)
for seconds, name in sorted(TimedResult.times, reverse=True)[:8]:
    print("slowest: %5.1f s %s" % (seconds, name))
failed = len(result.failures) + len(result.errors)
# A class skipped or failed in setUpClass is one entry in `skipped` or `errors` but no test in
# `testsRun`: the passed count counts tests only.
failed_tests = [t for t, _ in result.failures + result.errors if isinstance(t, unittest.TestCase)]
skipped = [t for t, _ in result.skipped if isinstance(t, unittest.TestCase)]
skipped_classes = len(result.skipped) - len(skipped)
print("%d passed, %d failed, %d skipped%s" % (
    result.testsRun - len(failed_tests) - len(skipped), failed, len(skipped),
    " (and %d class%s skipped whole)" % (skipped_classes, "" if skipped_classes == 1 else "es") if skipped_classes else ""))
sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
