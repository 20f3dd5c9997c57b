#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A prefetching client in a process of its own, printing JSON lines:
{"event": "prefetching", "receipt"} or {"event": "refused", "error", "message"} per PrefetchImages,
{"event": "cancelled", "receipt", "count"} (or "error") per CancelPrefetch, {"event": "fetched", "sources"}
per fetch command (FetchImage's source for each URL, in order), and
{"event": "prefetch-finished", "receipt", "stored", "failed"} per PrefetchFinished it receives.

prefetch_client.py ADDRESS
Reads commands from standard input: "prefetch URL URL...", "cancel RECEIPT [URL...]", "fetch URL URL..."
(the images this same client uses, one FetchImage after another).
Prints 'ready' first (after its match rule is in place)."""
import os
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

import contract

from observer_util import on_commands, out

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])
downloader = dbus.Interface(bus.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False),
                            contract.Downloader.INTERFACE)


def prefetch(arg):
    urls = dbus.Array(arg.split(), signature="s")
    downloader.PrefetchImages(urls, dbus.Dictionary({}, signature="sv"),
                              reply_handler=lambda r: out({"event": "prefetching", "receipt": str(r)}),
                              error_handler=lambda e: out({"event": "refused", "error": e.get_dbus_name(),
                                                           "message": e.get_dbus_message()}))


def cancel(arg):
    receipt, *urls = arg.split()
    downloader.CancelPrefetch(receipt, dbus.Array(urls, signature="s"),
                              reply_handler=lambda n: out({"event": "cancelled", "receipt": receipt, "count": int(n)}),
                              error_handler=lambda e: out({"event": "cancelled", "receipt": receipt, "error": e.get_dbus_name()}))


def fetch(arg):
    sources = []
    for url in arg.split():
        fd, size, info = downloader.FetchImage(url, dbus.Dictionary({}, signature="sv"))
        os.close(fd.take())
        sources.append(str(info[contract.Downloader.FETCH_IMAGE_INFO_SOURCE]))
    out({"event": "fetched", "sources": sources})


bus.add_signal_receiver(
    lambda receipt, stored, failed: out({"event": "prefetch-finished", "receipt": str(receipt), "stored": int(stored),
                                         "failed": int(failed)}),
    signal_name=contract.Downloader.PrefetchFinished, dbus_interface=contract.Downloader.INTERFACE)
bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus").GetId(dbus_interface="org.freedesktop.DBus")
print("ready", flush=True)
on_commands({"prefetch": prefetch, "cancel": cancel, "fetch": fetch})
GLib.MainLoop().run()
