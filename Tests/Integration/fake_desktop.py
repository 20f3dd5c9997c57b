#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Stand-ins for desktop services, printing what they see as JSON lines (with arrival times):

fake_desktop.py ADDRESS watcher [--hold]
                                       org.kde.StatusNotifierWatcher; also prints items' NewStatus/NewToolTip
                                       and their menus' LayoutUpdated and ItemsPropertiesUpdated; with
                                       --hold, a registration is answered when a line "answer" comes
fake_desktop.py ADDRESS notifications [CAPABILITY...]
                                       org.freedesktop.Notifications (Notify, CloseNotification), with
                                       "body" and these capabilities; a line "dismiss ID" on stdin
                                       closes ID as the user would (reason 2)
fake_desktop.py ADDRESS launcher       a dock: prints com.canonical.Unity.LauncherEntry Update signals
Prints 'ready' once its name is owned and its match rules are in place."""
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

from observer_util import on_commands, out, plain

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])
mode = sys.argv[2]


class Watcher(dbus.service.Object):
    held = []

    @dbus.service.method("org.kde.StatusNotifierWatcher", in_signature="s", out_signature="", sender_keyword="sender",
                         async_callbacks=("reply", "error"))
    def RegisterStatusNotifierItem(self, service, sender=None, reply=None, error=None):
        out({"event": "register", "service": str(service), "sender": str(sender)})
        self.StatusNotifierItemRegistered(service)
        if "--hold" in sys.argv[3:]:
            self.held.append((reply, sender))
        else:
            reply()

    @dbus.service.signal("org.kde.StatusNotifierWatcher", signature="s")
    def StatusNotifierItemRegistered(self, service):
        pass


class Notifications(dbus.service.Object):
    next_id = 1

    @dbus.service.method("org.freedesktop.Notifications", in_signature="susssasa{sv}i", out_signature="u")
    def Notify(self, app, replaces, icon, summary, body, actions, hints, timeout):
        nid = int(replaces)
        if nid == 0:
            nid = Notifications.next_id
            Notifications.next_id += 1
        out({"event": "Notify", "app": str(app), "replaces": int(replaces), "id": nid, "icon": str(icon),
             "summary": str(summary), "body": str(body), "hints": {k: plain(v) for k, v in hints.items()}})
        return nid

    @dbus.service.method("org.freedesktop.Notifications", in_signature="u", out_signature="")
    def CloseNotification(self, nid):
        out({"event": "Close", "id": int(nid)})
        self.NotificationClosed(nid, 3)  # closed by a call, as the spec says

    @dbus.service.signal("org.freedesktop.Notifications", signature="uu")
    def NotificationClosed(self, nid, reason):
        pass

    @dbus.service.method("org.freedesktop.Notifications", in_signature="", out_signature="as")
    def GetCapabilities(self):
        return ["body"] + sys.argv[3:]  # e.g. body-markup

    @dbus.service.method("org.freedesktop.Notifications", in_signature="", out_signature="ssss")
    def GetServerInformation(self):
        out({"event": "info"})  # a marker: every call the server got before this one is printed
        return ("fake", "netactivity tests", "1", "1.2")


if mode == "watcher":
    name = dbus.service.BusName("org.kde.StatusNotifierWatcher", bus)
    watcher = Watcher(bus, "/StatusNotifierWatcher")

    def answer(_arg):
        """Answers the held registrations, then pings each caller: once the ping is answered, the
        caller has read the answer (one connection's messages reach it in order)."""
        for reply, sender in watcher.held:
            reply()
            bus.call_blocking(sender, "/", "org.freedesktop.DBus.Peer", "Ping", "", ())
        out({"event": "answered", "count": len(watcher.held)})
        watcher.held.clear()

    on_commands({"answer": answer})
    bus.add_signal_receiver(lambda status, sender=None: out({"event": "NewStatus", "status": str(status), "sender": sender}),
                            signal_name="NewStatus", dbus_interface="org.kde.StatusNotifierItem", sender_keyword="sender")
    bus.add_signal_receiver(lambda sender=None: out({"event": "NewToolTip", "sender": sender}),
                            signal_name="NewToolTip", dbus_interface="org.kde.StatusNotifierItem", sender_keyword="sender")
    bus.add_signal_receiver(lambda revision, parent, sender=None: out({"event": "LayoutUpdated", "revision": int(revision),
                                                                       "parent": int(parent), "sender": sender}),
                            signal_name="LayoutUpdated", dbus_interface="com.canonical.dbusmenu", sender_keyword="sender")
    bus.add_signal_receiver(lambda updated, removed, sender=None: out({
        "event": "ItemsPropertiesUpdated", "sender": sender,
        "updated": {str(int(i)): {k: plain(v) for k, v in p.items()} for i, p in updated},
        "removed": {str(int(i)): [str(k) for k in keys] for i, keys in removed}}),
        signal_name="ItemsPropertiesUpdated", dbus_interface="com.canonical.dbusmenu", sender_keyword="sender")
elif mode == "notifications":
    name = dbus.service.BusName("org.freedesktop.Notifications", bus)
    server = Notifications(bus, "/org/freedesktop/Notifications")

    def dismiss(arg):
        server.NotificationClosed(dbus.UInt32(int(arg)), dbus.UInt32(2))
        out({"event": "dismissed", "id": int(arg)})

    on_commands({"dismiss": dismiss})
elif mode == "launcher":
    bus.add_signal_receiver(
        lambda app, props: out({"event": "Update", "app": str(app), "props": {k: plain(v) for k, v in props.items()}}),
        signal_name="Update", dbus_interface="com.canonical.Unity.LauncherEntry")
else:
    sys.exit("unknown mode " + mode)
bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus").GetId(dbus_interface="org.freedesktop.DBus")
print("ready", flush=True)
GLib.MainLoop().run()
