#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A separate client that pings the agent (org.freedesktop.DBus.Peer.Ping, which only a turning
loop answers) back to back and reports the round trips: "the loop never waits", measured from
outside. Usage: prober.py ADDRESS; prints "ready" after its first round trip, then pings until
stdin closes and prints {"count": N, "max_ms": X, "p99_ms": Y} as its last line."""
import json
import sys
import threading
import time

import dbus

import contract

NAME, PATH = contract.BUS_NAME, contract.OBJECT_PATH

conn = dbus.bus.BusConnection(sys.argv[1])
times = []
stop = threading.Event()


def ping():
    t = time.monotonic()
    conn.call_blocking(NAME, PATH, "org.freedesktop.DBus.Peer", "Ping", "", (), timeout=30)
    return time.monotonic() - t


ping()
print("ready", flush=True)
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
while not stop.is_set():
    times.append(ping())
    time.sleep(0.002)
times.sort()
print(json.dumps({"count": len(times), "max_ms": times[-1] * 1000 if times else 0,
                  "p99_ms": times[int(len(times) * 0.99)] * 1000 if times else 0}), flush=True)
