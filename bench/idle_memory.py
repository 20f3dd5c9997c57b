#!/usr/bin/env python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A spell of work on an agent that has been quiet, then the same at once, and the agent's CPU
time for each (from /proc/PID/schedstat, in nanoseconds); then this client leaves and the quiet
comes again: when the agent's RSS falls (its timers, such as the task's linger, end first), or
after 4 x QUIET. Then the agent's RSS.

Usage: idle_memory.py BUS_ADDRESS AGENT_PID QUIET_SECONDS
Prints: after_quiet_us=N warm_us=N rss_kib=N
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Integration"))
import dbus  # noqa: E402

import contract  # noqa: E402

address, pid, quiet = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bus = dbus.bus.BusConnection(address)
agent = bus.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False)
A = contract.Activity


def cpu_ns():
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def spell():
    before = cpu_ns()
    agent.GetAll(A.INTERFACE, dbus_interface=contract.PROPERTIES)
    agent.get_dbus_method(A.IncrementActivityCount, A.INTERFACE)()
    agent.get_dbus_method(A.DecrementActivityCount, A.INTERFACE)()
    task = agent.get_dbus_method(A.BeginTask, A.INTERFACE)("bench", dbus.Dictionary({}, signature="sv"))
    bus.get_object(contract.BUS_NAME, task, introspect=False).get_dbus_method(
        contract.Task.Complete, contract.Task.INTERFACE)("")
    agent.GetAll(contract.ImageCache.INTERFACE, dbus_interface=contract.PROPERTIES)
    time.sleep(0.5)  # the coalesced signals and the task's linger timer are the spell's too
    return (cpu_ns() - before) // 1000


def rss_kib():
    with open("/proc/%d/status" % pid) as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


after_quiet = spell()
warm = spell()
bus.close()  # the agent's work on this client's departure is the spell's too
time.sleep(1)
worked = rss_kib()
deadline = time.monotonic() + 4 * quiet
while rss_kib() > worked - 1024 and time.monotonic() < deadline:
    time.sleep(0.5)
print("after_quiet_us=%d warm_us=%d rss_kib=%d" % (after_quiet, warm, rss_kib()))
