#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A client of the downloader in a process of its own, printing JSON lines:
{"event": "requested", "url", "receipt", "task", "cached"} or {"event": "refused", "url", "error"} per URL,
then {"event": "finished", receipt, url, ok, error_name, error_message} per DownloadFinished it receives.

download_client.py ADDRESS [--times N] URL...   asks for each URL N times (default 1), then waits
download_client.py ADDRESS --listen             asks for nothing: shows what a bystander receives
Prints 'ready' first (after its match rule is in place)."""
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

import contract
from observer_util import out

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])
args = sys.argv[2:]
times = 1
if args[:1] == ["--times"]:
    times, args = int(args[1]), args[2:]


bus.add_signal_receiver(
    lambda receipt, url, ok, name, message: out({"event": "finished", "receipt": str(receipt), "url": str(url),
                                                 "ok": bool(ok), "error_name": str(name), "error_message": str(message)}),
    signal_name=contract.Downloader.DownloadFinished, dbus_interface=contract.Downloader.INTERFACE)
bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus").GetId(dbus_interface="org.freedesktop.DBus")
print("ready", flush=True)
if args != ["--listen"]:
    downloader = dbus.Interface(bus.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False),
                                contract.Downloader.INTERFACE)
    for _ in range(times):
        for url in args:
            try:
                receipt, task, cached = downloader.DownloadImage(url, dbus.Dictionary({}, signature="sv"))
                out({"event": "requested", "url": url, "receipt": str(receipt), "task": str(task), "cached": bool(cached),
                     "unique_name": bus.get_unique_name()})
            except dbus.exceptions.DBusException as e:
                out({"event": "refused", "url": url, "error": e.get_dbus_name(), "message": e.get_dbus_message()})
GLib.MainLoop().run()
