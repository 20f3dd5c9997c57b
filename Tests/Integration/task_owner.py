#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""An app that begins one task and hears what panels ask of it: prints the task's path, then one
JSON line per CancelRequested or SuspendRequested that reaches this connection. With --obey it
does what is asked (completes with Error.Cancelled, suspends, resumes) after printing.
A second connection of the same process, with a match rule for every Task signal, prints what it
overhears as {"overheard": ...}: a request must reach the owner alone.

    task_owner.py ADDRESS OPTIONS_JSON [--obey]    (options: {"cancellable": true, ...})

Prints "ready" once both connections are subscribed, then {"path": ..., "owner": ...}. A line
"suspend", "resume", "complete" or "progress RECEIVED EXPECTED" on stdin does that to the task, as
the app would on its own, and prints {"done": LINE}."""
import json
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

import contract

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])
bystander = dbus.bus.BusConnection(sys.argv[1])
obey = "--obey" in sys.argv[3:]
TASK = contract.Task.INTERFACE

options = dbus.Dictionary({k: dbus.Boolean(v) if isinstance(v, bool) else dbus.String(v) if isinstance(v, str) else dbus.UInt64(v)
                           for k, v in json.loads(sys.argv[2]).items()}, signature="sv")
agent = dbus.Interface(bus.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False),
                       contract.Activity.INTERFACE)
path = str(agent.BeginTask("owned task", options))
task = dbus.Interface(bus.get_object(contract.BUS_NAME, path, introspect=False), TASK)


def out(obj):
    print(json.dumps(obj), flush=True)


def on_signal(*args, member=None, path=None, destination=None):
    out({"signal": str(member), "args": [bool(a) for a in args], "path": str(path)})
    if not obey:
        return
    if member == contract.Task.CancelRequested:
        task.Complete(contract.ERROR_PREFIX + "Cancelled")
    elif args and args[0]:
        task.Suspend()
    else:
        task.Resume()


bus.add_signal_receiver(on_signal, dbus_interface=TASK, member_keyword="member", path_keyword="path")
bystander.add_signal_receiver(
    lambda *a, member=None: out({"overheard": str(member)}), dbus_interface=TASK, member_keyword="member")
# Both match rules are in place once a round trip through the bus has been answered.
bystander.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus").GetId(dbus_interface="org.freedesktop.DBus")
bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus").GetId(dbus_interface="org.freedesktop.DBus")
def on_command(source, _condition):
    line = source.readline().strip()
    if not line:
        return False
    words = line.split()
    if words[0] == "progress":  # progress RECEIVED EXPECTED
        task.SetProgress(dbus.UInt64(0), dbus.UInt64(0), dbus.UInt64(int(words[1])), dbus.UInt64(int(words[2])))
    else:
        {"suspend": task.Suspend, "resume": task.Resume, "complete": lambda: task.Complete("")}[line]()
    out({"done": line})
    return True


GLib.io_add_watch(sys.stdin, GLib.IO_IN | GLib.IO_HUP, on_command)
print("ready", flush=True)
out({"path": path, "owner": bus.get_unique_name()})
GLib.MainLoop().run()
