#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A FetchImage client in a process of its own, printing JSON lines:
{"event": "fetched", "url", "receipt", "size", "info", "sha256", "fd_target"} or
{"event": "failed", "url", "receipt", "error", "message"} per answer, {"event": "cancel", "receipt", "result"}.

fetch_client.py ADDRESS [--announce] [URL[#RECEIPT]]...   fetches every URL at once (the calls wait together)
Then reads commands from standard input: "fetch URL[#RECEIPT]", "cancel RECEIPT".
Prints 'ready' first."""
import hashlib
import os
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

import contract

from observer_util import on_commands, out, plain

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])
args = sys.argv[2:]
announce = "--announce" in args
args = [a for a in args if a != "--announce"]
downloader = dbus.Interface(bus.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False),
                            contract.Downloader.INTERFACE)


def fetch(spec):
    url, _, receipt = spec.partition("#")
    options = {}
    if receipt:
        options["receipt"] = dbus.String(receipt)
    if announce:
        options["announce"] = dbus.Boolean(True)

    def ok(fd, size, info):
        fd = fd.take()
        try:
            data = os.pread(fd, int(size) + 1, 0)
            target = os.readlink("/proc/self/fd/%d" % fd)
        finally:
            os.close(fd)
        out({"event": "fetched", "url": url, "receipt": receipt, "size": int(size), "read": len(data),
             "info": {str(k): plain(v) for k, v in info.items()}, "sha256": hashlib.sha256(data).hexdigest(),
             "fd_target": target})

    def failed(e):
        out({"event": "failed", "url": url, "receipt": receipt, "error": e.get_dbus_name(), "message": e.get_dbus_message()})

    downloader.FetchImage(url, dbus.Dictionary(options, signature="sv"), reply_handler=ok, error_handler=failed,
                          timeout=120)


def cancel(arg):
    downloader.CancelDownload(arg, reply_handler=lambda r: out({"event": "cancel", "receipt": arg, "result": bool(r)}),
                              error_handler=lambda e: out({"event": "cancel", "receipt": arg, "error": e.get_dbus_name()}))


bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus").GetId(dbus_interface="org.freedesktop.DBus")
print("ready", flush=True)
for spec in args:
    fetch(spec)
on_commands({"fetch": fetch, "cancel": cancel})
GLib.MainLoop().run()
