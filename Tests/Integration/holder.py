#!/usr/bin/python3
"""A client that takes activity and then waits to be killed: counts and a lease."""
import os
import sys

import dbus

bus = dbus.bus.BusConnection(sys.argv[1])
agent = dbus.Interface(bus.get_object("org.example.NetActivity", "/org/example/NetActivity"), "org.example.NetActivity")
agent.IncrementActivityCount()
agent.IncrementActivityCount()
lease = agent.BeginActivity("holder test")
fd = lease.take()
print("ready", flush=True)
sys.stdin.read()  # until killed
os.close(fd)
