#!/usr/bin/env bash
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# The agent's IncrementActivityCount next to the same method in C on libdbus and on sd-bus
# (bench/reference), on one private bus, daemon, service and client pinned to one CPU.
#   bench/roundtrips.sh AGENT REFERENCE_DIR
# REFERENCE_DIR holds the built client and services (make -C bench/reference OUT=DIR). Knobs:
# REPEAT (rounds, rows interleaved round by round; cells are medians), RTT_N, PIPE_N, WINDOW,
# CONC, CONC_N, PIN (a CPU list for taskset).
set -euo pipefail
AGENT=$1 REF=$2
REPEAT=${REPEAT:-3} RTT_N=${RTT_N:-20000} PIPE_N=${PIPE_N:-100000} WINDOW=${WINDOW:-1000}
CONC=${CONC:-4} CONC_N=${CONC_N:-5000} PIN=${PIN:-0}
RUN=$(mktemp -d /tmp/netactivity-roundtrips.XXXXXX)
BUS_PID='' SVC_PID=''
cleanup() {
  [ -n "$SVC_PID" ] && kill "$SVC_PID" 2>/dev/null && wait "$SVC_PID" 2>/dev/null
  [ -n "$BUS_PID" ] && kill "$BUS_PID" 2>/dev/null && wait "$BUS_PID" 2>/dev/null
  rm -rf "$RUN"
}
trap cleanup EXIT
pinned() { taskset -c "$PIN" "$@"; }

taskset -c "$PIN" dbus-daemon --session --nofork --nopidfile --address="unix:path=$RUN/bus" --print-address=3 3>"$RUN/address" 2>/dev/null &
BUS_PID=$!
for _ in $(seq 100); do [ -s "$RUN/address" ] && break; sleep 0.05; done
export DBUS_SESSION_BUS_ADDRESS; DBUS_SESSION_BUS_ADDRESS=$(head -n1 "$RUN/address")

ROWS=("sd-bus (C)" "libdbus (C)" "netactivityd (Swift)")
command_of() {
  case $1 in
    "sd-bus (C)") echo "$REF/service_sdbus" ;;
    "libdbus (C)") echo "$REF/service_libdbus" ;;
    *) echo "$AGENT" ;;
  esac
}
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
declare -A V
put() { V["$1#$2"]+="$3 "; }
# A run whose calls failed shows the first error's name instead of a number.
measure() {  # measure ROW COLUMN FIELD CLIENT-ARGS...
  local row=$1 column=$2 name=$3 out; shift 3
  out=$(pinned "$REF/client" "$@" -T 10000) || true
  if [ "$(field errors "$out")" = 0 ]; then put "$row" "$column" "$(field "$name" "$out")"
  else put "$row" "$column" "$(field first_error "$out" | sed 's/.*\.//')"; fi
  [ "$name" = calls_per_s ] && [ "$column" = rtt ] && { put "$row" p50 "$(field p50_us "$out")"; put "$row" p99 "$(field p99_us "$out")"; }
  return 0
}
for round in $(seq "$REPEAT"); do
  for row in "${ROWS[@]}"; do
    echo "round $round/$REPEAT: $row" >&2
    XDG_CACHE_HOME="$RUN/cache" taskset -c "$PIN" "$(command_of "$row")" >/dev/null 2>>"$RUN/services.log" &
    SVC_PID=$!
    "$REF/client" wait -T 15000 || { echo "$row did not take its name" >&2; exit 1; }
    sleep 0.5
    put "$row" idle "$(awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$SVC_PID/status")"
    measure "$row" rtt calls_per_s rtt -n "$RTT_N"
    measure "$row" pipe calls_per_s pipelined -n "$PIPE_N" -w "$WINDOW"
    measure "$row" conc calls_per_s rtt -n "$CONC_N" -c "$CONC"
    put "$row" peak "$(awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$SVC_PID/status")"
    kill "$SVC_PID"; wait "$SVC_PID" 2>/dev/null || true; SVC_PID=
    "$REF/client" released -T 15000
  done
done
median() {  # the median of the numbers given, or the first word that is not one
  awk '{ n = 0; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) v[++n] = $i + 0; else { print $i; exit }
         for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
         m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2; printf(m >= 1000 ? "%.0f\n" : "%.1f\n", m) }' <<<"$1"
}
echo "# D-Bus round-trip benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1), kernel $(uname -r)"
echo "- $(dbus-daemon --version | head -n1), libsystemd $(pkg-config --modversion libsystemd 2>/dev/null || echo '?')"
echo
echo "| service | rtt calls/s | p50 µs | p99 µs | pipelined calls/s | $CONC clients calls/s | idle RSS MiB | peak RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for row in "${ROWS[@]}"; do
  line="| $row"
  for column in rtt p50 p99 pipe conc idle peak; do line+=" | $(median "${V["$row#$column"]}")"; done
  echo "$line |"
done
echo
echo "Median of $REPEAT rounds; rtt $RTT_N calls, pipelined $PIPE_N ($WINDOW in flight), $CONC clients × $CONC_N calls."
