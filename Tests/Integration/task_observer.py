#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A panel's view of tasks: follows ObjectManager and the tasks' PropertiesChanged, printing one
JSON line per signal with its arrival time (CLOCK_MONOTONIC). Starts with GetManagedObjects, as a
panel does, and prints 'ready' once subscribed."""
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

from observer_util import out, plain
import contract

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])
NAME = contract.BUS_NAME
ROOT = contract.OBJECT_PATH
TASK = contract.Task.INTERFACE


bus.add_signal_receiver(
    lambda path, ifaces: out({"signal": "InterfacesAdded", "path": str(path),
                              "props": {k: plain(v) for k, v in ifaces.get(TASK, {}).items()}}),
    signal_name="InterfacesAdded", dbus_interface="org.freedesktop.DBus.ObjectManager", path=ROOT)
bus.add_signal_receiver(
    lambda path, ifaces: out({"signal": "InterfacesRemoved", "path": str(path), "interfaces": [str(i) for i in ifaces]}),
    signal_name="InterfacesRemoved", dbus_interface="org.freedesktop.DBus.ObjectManager", path=ROOT)
bus.add_signal_receiver(
    lambda iface, changed, inv, path=None: out({"signal": "PropertiesChanged", "path": str(path),
                                                "changed": {k: plain(v) for k, v in changed.items()}}),
    signal_name="PropertiesChanged", dbus_interface="org.freedesktop.DBus.Properties", arg0=TASK,
    path_keyword="path")
existing = bus.get_object(NAME, ROOT, introspect=False).GetManagedObjects(
    dbus_interface="org.freedesktop.DBus.ObjectManager")
print("ready", flush=True)
out({"signal": "GetManagedObjects", "paths": sorted(str(p) for p in existing)})
GLib.MainLoop().run()
