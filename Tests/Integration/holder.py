#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A client that takes activity and then waits to be killed.

holder.py ADDRESS          two counts and a lease
holder.py ADDRESS tasks    a running task with progress and a suspended task; prints their paths
"""
import os
import sys

import dbus

import contract

bus = dbus.bus.BusConnection(sys.argv[1])
agent = dbus.Interface(bus.get_object(contract.BUS_NAME, contract.OBJECT_PATH), contract.Activity.INTERFACE)
if sys.argv[2:] == ["tasks"]:
    running = agent.BeginTask("holder running", dbus.Dictionary({"expected-to-receive": dbus.UInt64(1000)}, signature="sv"))
    task = dbus.Interface(bus.get_object(contract.BUS_NAME, running), contract.Task.INTERFACE)
    task.SetProgress(0, 0, 250, 1000)
    suspended = agent.BeginTask("holder suspended", dbus.Dictionary({"suspended": True}, signature="sv"))
    print("ready", running, suspended, flush=True)
else:
    agent.IncrementActivityCount()
    agent.IncrementActivityCount()
    lease = agent.BeginActivity("holder test")
    fd = lease.take()
    print("ready", flush=True)
sys.stdin.read()  # until killed
