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
print("%d passed, %d failed, %d skipped" % (result.testsRun - failed - len(result.skipped), failed, len(result.skipped)))
sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
