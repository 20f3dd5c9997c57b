#!/usr/bin/python3
"""One hostile app: a process that opens many connections and takes as much as the agent gives.

hog.py ADDRESS leases|tasks CONNECTIONS PER_CONNECTION [DESCRIPTION_BYTES]
Prints one JSON line {"granted": N, "refusal": [name, message] or null} after trying, then holds
everything until stdin closes."""
import json
import sys

import dbus

address, what, connections, each = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
description = "x" * (int(sys.argv[5]) if len(sys.argv) > 5 else 10)
held, conns, granted, refusal = [], [], 0, None
for _ in range(connections):
    c = dbus.bus.BusConnection(address)
    conns.append(c)
    agent = dbus.Interface(c.get_object("org.example.NetActivity", "/org/example/NetActivity", introspect=False),
                           "org.example.NetActivity")
    for _ in range(each):
        try:
            if what == "leases":
                held.append(agent.BeginActivity("hog").take())
            else:
                agent.BeginTask(description, dbus.Dictionary({}, signature="sv"))
            granted += 1
        except dbus.exceptions.DBusException as e:
            refusal = [e.get_dbus_name(), e.get_dbus_message()]
            break
print(json.dumps({"granted": granted, "refusal": refusal}), flush=True)
sys.stdin.read()
