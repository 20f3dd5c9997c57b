#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A panel's view of the agent: prints every Visible signal and PropertiesChanged as a JSON line
with the CLOCK_MONOTONIC time it arrived, flushed. Prints 'ready' once subscribed."""
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

import contract
from observer_util import out, plain

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])


bus.add_signal_receiver(lambda v: out({"signal": "Visible", "value": bool(v)}),
                        signal_name=contract.Activity.Visible, dbus_interface=contract.Activity.INTERFACE)
bus.add_signal_receiver(
    lambda iface, changed, inv: out({"signal": "PropertiesChanged", "changed": {k: plain(v) for k, v in changed.items()},
                                     "invalidated": [str(n) for n in inv]}),
    signal_name="PropertiesChanged", dbus_interface=contract.PROPERTIES,
    path=contract.OBJECT_PATH, arg0=contract.Activity.INTERFACE)
# A round trip to the daemon makes sure the match rules are in place before 'ready'.
bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus").GetId(dbus_interface="org.freedesktop.DBus")
print("ready", flush=True)
GLib.MainLoop().run()
