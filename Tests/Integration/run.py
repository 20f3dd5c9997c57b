#!/usr/bin/python3
"""Runs the integration tests (Debian's /usr/bin/python3, which has python3-dbus and gi).

Usage: run.py --bin .build/debug [-k pattern]
Ends with a line 'N passed, N failed'.
"""
import argparse
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
parser = argparse.ArgumentParser()
parser.add_argument("--bin", default=".build/debug")
parser.add_argument("-k", dest="pattern", action="append", default=[])
args = parser.parse_args()
os.environ["NETACTIVITY_BIN"] = os.path.abspath(args.bin)
sys.path.insert(0, here)

loader = unittest.TestLoader()
if args.pattern:
    loader.testNamePatterns = ["*%s*" % p for p in args.pattern]
suite = loader.discover(here, pattern="test_*.py", top_level_dir=here)
result = unittest.TextTestRunner(verbosity=2).run(suite)
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
