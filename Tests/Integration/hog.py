#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""One hostile app: a process that opens many connections and takes as much as the agent gives.

hog.py ADDRESS leases|tasks CONNECTIONS PER_CONNECTION [DESCRIPTION_BYTES]
hog.py ADDRESS downloads CONNECTIONS PER_CONNECTION URL_PREFIX   (URL_PREFIX-C-I.png, never cached)
Prints one JSON line {"granted": N, "refusal": [name, message] or null} after trying, then holds
everything until stdin closes (used by the hostile tests and by bench/attack.py)."""
import json
import sys

import dbus

import contract

address, what, connections, each = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
extra = sys.argv[5] if len(sys.argv) > 5 else "10"
description = "x" * (int(extra) if what == "tasks" else 0)
held, conns, granted, refusal = [], [], 0, None
for n in range(connections):
    c = dbus.bus.BusConnection(address)
    conns.append(c)
    obj = c.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False)
    agent = dbus.Interface(obj, contract.Activity.INTERFACE)
    downloader = dbus.Interface(obj, contract.Downloader.INTERFACE)
    for i in range(each):
        try:
            if what == "leases":
                held.append(agent.BeginActivity("hog").take())
            elif what == "downloads":
                downloader.DownloadImage("%s-%d-%d.png" % (extra, n, i), dbus.Dictionary({}, signature="sv"))
            else:
                agent.BeginTask(description, dbus.Dictionary({}, signature="sv"))
            granted += 1
        except dbus.exceptions.DBusException as e:
            refusal = [e.get_dbus_name(), e.get_dbus_message()]
            break
print(json.dumps({"granted": granted, "refusal": refusal}), flush=True)
sys.stdin.read()
