#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A stand-in for KDE Plasma's job tracker: owns org.kde.JobViewServer and serves
org.kde.JobViewServerV2 at /JobViewServer and org.kde.JobViewV3 on each view it makes, with the
members of KDE's kjobwidgets XML. Prints "ready", then one JSON line per call it gets:
{"call": "requestView", "view": PATH, "args": [...]}, {"call": "update"|"terminate", "view": PATH,
"args": [...]}. A line "NAME PATH" on stdin (cancelRequested, suspendRequested, resumeRequested)
emits that signal from the view at PATH, as Plasma's buttons do.

    job_view_server.py ADDRESS"""
import json
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

from observer_util import plain


def fields(d):
    return {str(k): plain(v) for k, v in d.items()}

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])
SERVER, VIEW = "org.kde.JobViewServerV2", "org.kde.JobViewV3"
views = {}


def out(obj):
    print(json.dumps(obj), flush=True)


class View(dbus.service.Object):
    def __init__(self, path):
        super().__init__(bus, path)
        self.path = path

    @dbus.service.method(VIEW, in_signature="usa{sv}", out_signature="")
    def terminate(self, code, message, hints):
        out({"call": "terminate", "view": self.path, "args": [int(code), str(message), fields(hints)]})

    @dbus.service.method(VIEW, in_signature="a{sv}", out_signature="")
    def update(self, properties):
        out({"call": "update", "view": self.path, "args": [fields(properties)]})

    @dbus.service.signal(VIEW, signature="")
    def cancelRequested(self):
        pass

    @dbus.service.signal(VIEW, signature="")
    def suspendRequested(self):
        pass

    @dbus.service.signal(VIEW, signature="")
    def resumeRequested(self):
        pass


class Server(dbus.service.Object):
    @dbus.service.method(SERVER, in_signature="sia{sv}", out_signature="o")
    def requestView(self, desktop_entry, capabilities, hints):
        path = "/org/kde/notificationmanager/jobs/JobView_%d" % (len(views) + 1)
        views[path] = View(path)
        out({"call": "requestView", "view": path, "args": [str(desktop_entry), int(capabilities), fields(hints)]})
        return dbus.ObjectPath(path)


def on_command(source, _condition):
    line = source.readline().split()
    if not line:
        return False
    getattr(views[line[1]], line[0])()
    out({"emitted": line[0], "view": line[1]})
    return True


Server(bus, "/JobViewServer")
bus.request_name("org.kde.JobViewServer")
GLib.io_add_watch(sys.stdin, GLib.IO_IN | GLib.IO_HUP, on_command)
print("ready", flush=True)
GLib.MainLoop().run()
