#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The test server's flowing body (test_downloads.ImageServer.flow), written by a process of its own:
flow_writer.py FD PIECE reads the body from stdin (its length as 8 bytes, then the bytes), writes
PIECE bytes of it to the socket FD every 50 ms, and the rest at once when a byte arrives on stdin
(the gate opened) or stdin closes. A process that mostly sleeps is woken on time however loaded
the machine; the test's own process, whose threads serve HTTP, may not be for half a second."""
import os
import select
import struct
import sys

fd, piece = int(sys.argv[1]), int(sys.argv[2])
stdin = sys.stdin.buffer
(length,) = struct.unpack(">Q", stdin.read(8))
body = stdin.read(length)
sent = 0
try:
    while sent + piece < len(body):
        ready, _, _ = select.select([stdin], [], [], 0.05)
        if ready:
            break
        sent += os.write(fd, body[sent:sent + piece])
    view = memoryview(body)[sent:]
    while view:
        view = view[os.write(fd, view):]
except (BrokenPipeError, ConnectionResetError):  # the agent hung up (a cancelled transfer)
    pass
