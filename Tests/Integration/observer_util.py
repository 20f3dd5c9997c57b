# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Shared by the observer processes: their JSON lines out, D-Bus values as plain JSON-able Python
values, and the commands a test writes to their standard input."""
import json
import sys
import time

import dbus


def out(obj):
    """One JSON line on standard output, stamped with the monotonic time it was written."""
    obj["t"] = time.monotonic()
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def plain(v):
    if isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, (dbus.Array, list)):
        return [plain(x) for x in v]
    if isinstance(v, (dbus.Struct, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, (dbus.Double, float)):
        return float(v)
    if isinstance(v, (int,)):
        return int(v)
    return str(v)


def on_commands(handlers):
    """Runs handlers[VERB](ARG) for each "VERB ARG" line on standard input, from the GLib main
    loop; unknown verbs are ignored, and standard input's end stops the watch."""
    from gi.repository import GLib

    def command(source, condition):
        line = sys.stdin.readline()
        if not line:
            return False
        verb, _, arg = line.strip().partition(" ")
        if verb in handlers:
            handlers[verb](arg)
        return True

    GLib.io_add_watch(sys.stdin, GLib.IO_IN | GLib.IO_HUP, command)
