#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Stand-ins for system services on a private bus that plays the system bus:

fake_system.py ADDRESS [--metered N] [--profile NAME]
    org.freedesktop.NetworkManager at /org/freedesktop/NetworkManager, with its Metered property
    (u: 0 unknown, 1 yes, 2 no, 3 guessed yes, 4 guessed no) and State (u: 70 connected, 20
    disconnected, ...), and
    org.freedesktop.UPower.PowerProfiles at /org/freedesktop/UPower/PowerProfiles, with its
    ActiveProfile property (s), each readable with Properties.Get/GetAll and announced with
    PropertiesChanged as the real daemons do.

    org.freedesktop.login1 at /org/freedesktop/login1: Manager.Inhibit(what, who, why, mode)
    hands out the write end of a pipe and prints "inhibit WHAT MODE"; when every copy of it is
    closed it prints "released MS", MS the milliseconds since the last PrepareForSleep(true)
    (-1 if none was sent).

Lines on stdin: "metered N", "state N" and "profile NAME" change a property (and send PropertiesChanged),
then print "set NAME VALUE"; "sleep" and "wake" send PrepareForSleep(true/false) and print
"sent sleep"/"sent wake". Prints 'ready' once the names are owned."""
import argparse
import os
import sys
import time

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

from observer_util import on_commands

PROPS = "org.freedesktop.DBus.Properties"
NM = ("org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager", "org.freedesktop.NetworkManager")
PPD = ("org.freedesktop.UPower.PowerProfiles", "/org/freedesktop/UPower/PowerProfiles", "org.freedesktop.UPower.PowerProfiles")

parser = argparse.ArgumentParser()
parser.add_argument("address")
parser.add_argument("--metered", type=int, default=2)
parser.add_argument("--profile", default="balanced")
args = parser.parse_args()

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(args.address)


class Service(dbus.service.Object):
    def __init__(self, name, path, interface, props):
        self.interface = interface
        self.props = props
        self.bus_name = dbus.service.BusName(name, bus)
        super().__init__(self.bus_name, path)

    @dbus.service.method(PROPS, in_signature="ss", out_signature="v")
    def Get(self, interface, prop):
        if interface != self.interface or prop not in self.props:
            raise dbus.exceptions.DBusException("No such property", name="org.freedesktop.DBus.Error.InvalidArgs")
        return self.props[prop]

    @dbus.service.method(PROPS, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        return self.props if interface == self.interface else {}

    @dbus.service.signal(PROPS, signature="sa{sv}as")
    def PropertiesChanged(self, interface, changed, invalidated):
        pass

    def change(self, prop, value):
        self.props[prop] = value
        self.PropertiesChanged(self.interface, {prop: value}, dbus.Array([], signature="s"))
        print("set %s %s" % (prop, value), flush=True)


class Logind(dbus.service.Object):
    def __init__(self):
        self.bus_name = dbus.service.BusName("org.freedesktop.login1", bus)
        super().__init__(self.bus_name, "/org/freedesktop/login1")
        self.slept_at = None

    @dbus.service.method("org.freedesktop.login1.Manager", in_signature="ssss", out_signature="h")
    def Inhibit(self, what, who, why, mode):
        r, w = os.pipe()
        handed = dbus.types.UnixFd(w)  # a copy: ours is closed at once
        os.close(w)

        def hung_up(fd, condition):
            ms = -1 if self.slept_at is None else int((time.monotonic() - self.slept_at) * 1000)
            print("released %d" % ms, flush=True)
            os.close(fd)
            return False
        GLib.io_add_watch(r, GLib.IO_HUP | GLib.IO_ERR, hung_up)
        print("inhibit %s %s" % (what, mode), flush=True)
        return handed

    @dbus.service.signal("org.freedesktop.login1.Manager", signature="b")
    def PrepareForSleep(self, start):
        pass

    def sleep(self, start):
        if start:
            self.slept_at = time.monotonic()
        self.PrepareForSleep(start)
        print("sent %s" % ("sleep" if start else "wake"), flush=True)


logind = Logind()
nm = Service(*NM, {"Metered": dbus.UInt32(args.metered), "State": dbus.UInt32(70)})
ppd = Service(*PPD, {"ActiveProfile": dbus.String(args.profile)})
on_commands({"metered": lambda v: nm.change("Metered", dbus.UInt32(int(v))),
             "profile": lambda v: ppd.change("ActiveProfile", dbus.String(v)),
             "state": lambda v: nm.change("State", dbus.UInt32(int(v))),
             "sleep": lambda _: logind.sleep(True), "wake": lambda _: logind.sleep(False)})
print("ready", flush=True)
GLib.MainLoop().run()
