#!/usr/bin/env bash
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# timed.sh NAME COMMAND...: runs COMMAND and then prints one line of what it cost on stderr,
#   "timed: NAME: W s wall, C s CPU" (C: its own and its children's user and system time),
# and exits with COMMAND's status. make test's parts run under it, so that every run (CI's too)
# says where its minutes and its CPU go (docs/performance.md).
set -u
name=$1
shift
report=$(mktemp)
TIMEFORMAT='%R %U %S'
exec 3>&2
{ time "$@" 2>&3; } 2>"$report"
status=$?
exec 3>&-
awk -v name="$name" 'END { printf "timed: %s: %.1f s wall, %.1f s CPU\n", name, $1, $2 + $3 }' "$report" >&2
rm -f "$report"
exit $status
