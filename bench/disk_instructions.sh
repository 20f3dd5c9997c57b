#!/bin/bash
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# Instructions per small image kept on disk (an ETag), under callgrind: the agent's threads (its
# loop and the disk worker), N images by FetchImage after a warm-up, on a bus and a server of its
# own. The kernel's side (creating the files) is not counted: this is the figure that does not move
# with what the file system did before (see docs/performance.md, "The disk tier's CPU").
#
# Usage: disk_instructions.sh AGENT_WITHOUT_DEBUG_INFO BENCH_CLIENT [N]
# Prints: loop=I disk=I total=I (per image)
set -euo pipefail
cd "$(dirname "$0")/.."
AGENT=$1 CLIENT=$2 N=${3:-300}
W=$(mktemp -d /tmp/netactivity-disk-cg.XXXXXX)
BUSP='' AP='' HP=''
cleanup() {
  [ -n "$HP" ] && kill "$HP" 2>/dev/null
  [ -n "$AP" ] && kill "$AP" 2>/dev/null && wait "$AP" 2>/dev/null
  [ -n "$BUSP" ] && kill "$BUSP" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
dbus-daemon --session --nofork --nopidfile --address="unix:path=$W/bus" --print-address=3 3>"$W/addr" 2>/dev/null &
BUSP=$!
for _ in $(seq 100); do [ -s "$W/addr" ] && break; sleep 0.05; done
export DBUS_SESSION_BUS_ADDRESS=$(head -n1 "$W/addr")
XDG_CACHE_HOME="$W/cache" valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$W/cg.%p" \
  "$AGENT" 2>/dev/null &
AP=$!
for _ in $(seq 600); do busctl --address="$DBUS_SESSION_BUS_ADDRESS" status org.example.NetActivity >/dev/null 2>&1 && break; sleep 0.1; done
/usr/bin/python3 bench/http_server.py >"$W/http.port" 2>/dev/null &
HP=$!
for _ in $(seq 100); do [ -s "$W/http.port" ] && break; sleep 0.05; done
HTTP="http://127.0.0.1:$(head -n1 "$W/http.port")"
fetch() { mapfile -t u < <(for i in $(seq "$N"); do echo "$HTTP/tagged/$1-$i.png"; done); "$CLIENT" fetch 4 "${u[@]}" >/dev/null; }
settle() {  # until the disk worker's writes are done: the agent's files stop changing
  local last='' now
  for _ in $(seq 100); do now=$(ls "$W/cache/netactivity" 2>/dev/null | wc -l); [ "$now" = "$last" ] && break; last=$now; sleep 0.5; done
}
fetch warm; settle
callgrind_control -z "$AP" >/dev/null 2>&1
fetch measured; settle
callgrind_control -d measured "$AP" >/dev/null 2>&1
# The dump's files: one per thread (-01 the loop); the disk worker is the thread with the most after it.
loop=0 disk=0 total=0
for f in "$W"/cg.*-*; do
  grep -q '^desc: Trigger: .*measured' "$f" || continue
  n=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$f" | head -n1)
  total=$(( total + n ))
  case $f in *-01) loop=$n ;; *) [ "$n" -gt "$disk" ] && disk=$n ;; esac
done
echo "loop=$(( loop / N )) disk=$(( disk / N )) total=$(( total / N ))"
