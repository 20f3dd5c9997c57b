#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""How late the Visible signal is against the configured delays.

Measured from the moment the Increment/Decrement reply returns to the moment the Visible signal
arrives at a python3-dbus client (both CLOCK_MONOTONIC); the error is that minus the delay.
Usage: visible_timing.py BUS_ADDRESS CYCLES ACTIVATION COMPLETION
"""
import sys
import threading
import time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

address, cycles, activation, completion = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
listener = dbus.bus.BusConnection(address)
events = []
cond = threading.Condition()


def on_visible(v):
    with cond:
        events.append((bool(v), time.monotonic()))
        cond.notify_all()


listener.add_signal_receiver(on_visible, signal_name="Visible", dbus_interface="org.example.NetActivity")
threading.Thread(target=GLib.MainLoop().run, daemon=True).start()

caller = dbus.bus.BusConnection(address, mainloop=None)
# No introspection: this connection shares the GLib loop running in the other thread, which can
# finish the proxy's introspection call after a blocking call has stopped waiting for it, and the
# call then goes out with a guessed signature ("ssd" for Set). Variants are explicit instead.
obj = caller.get_object("org.example.NetActivity", "/org/example/NetActivity", introspect=False)
props = dbus.Interface(obj, "org.freedesktop.DBus.Properties")
props.Set("org.example.NetActivity", "ActivationDelay", dbus.Double(activation, variant_level=1))
props.Set("org.example.NetActivity", "CompletionDelay", dbus.Double(completion, variant_level=1))
agent = dbus.Interface(obj, "org.example.NetActivity")
# Start from a quiet indicator, with no signal of earlier activity still in flight.
deadline = time.monotonic() + 10
while props.Get("org.example.NetActivity", "Visible") and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(0.2)
with cond:
    events.clear()


def wait_for(n):
    with cond:
        cond.wait_for(lambda: len(events) >= n, timeout=5)
    return events[n - 1][1]


errors = []
for i in range(cycles):
    agent.IncrementActivityCount()
    t0 = time.monotonic()
    errors.append(wait_for(2 * i + 1) - t0 - activation)
    time.sleep(0.02)
    agent.DecrementActivityCount()
    t1 = time.monotonic()
    errors.append(wait_for(2 * i + 2) - t1 - completion)
    time.sleep(0.02)

errors.sort()
ms = [e * 1000 for e in errors]
p = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]
print("visible_timing n=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f min_ms=%.2f" % (len(ms), p(0.5), p(0.99), ms[-1], ms[0]))
