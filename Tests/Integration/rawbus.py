# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A D-Bus client on a raw socket, for clients no library would make: one that sends calls and
never reads its socket (so everything sent to it piles up in the bus), one that sends huge
messages. Only what the tests need: EXTERNAL auth, method calls with string and byte-array
arguments, little-endian."""
import os
import socket
import struct


def _pad(buf, n):
    return buf + b"\0" * ((-len(buf)) % n)


def _string(buf, s, sig=False):
    data = s.encode()
    if sig:
        return buf + struct.pack("<B", len(data)) + data + b"\0"
    buf = _pad(buf, 4)
    return buf + struct.pack("<I", len(data)) + data + b"\0"


def _field(buf, code, sig, value):
    buf = _pad(buf, 8)
    buf += struct.pack("<B", code)
    buf = _string(buf, sig, sig=True)
    return _string(buf, value, sig=(sig == "g"))


def method_call(serial, destination, path, interface, member, signature="", body=b"", no_reply=False):
    fields = b""
    fields = _field(fields, 1, "o", path)
    if interface:
        fields = _field(fields, 2, "s", interface)
    fields = _field(fields, 3, "s", member)
    if destination:
        fields = _field(fields, 6, "s", destination)
    if signature:
        fields = _field(fields, 8, "g", signature)
    head = struct.pack("<cBBBII", b"l", 1, 1 if no_reply else 0, 1, len(body), serial) + struct.pack("<I", len(fields)) + fields
    return _pad(head, 8) + body


def body_strings(*strings):
    buf = b""
    for s in strings:
        buf = _string(buf, s)
    return buf


def body_string_bytes(s, data):
    buf = _string(b"", s)
    buf = _pad(buf, 4)
    return buf + struct.pack("<I", len(data)) + data


class RawClient:
    """Connects and authenticates; `hello()` sends Hello without reading its reply."""

    def __init__(self, address):
        path = None
        for part in address.split(";")[0].split(":", 1)[1].split(","):
            key, _, value = part.partition("=")
            if key == "path":
                path = value
            elif key == "abstract":
                path = "\0" + value
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.sendall(b"\0AUTH EXTERNAL " + str(os.getuid()).encode().hex().encode() + b"\r\n")
        reply = b""
        while not reply.endswith(b"\r\n"):
            reply += self.sock.recv(1)
        assert reply.startswith(b"OK"), reply
        self.sock.sendall(b"BEGIN\r\n")
        self.serial = 0
        self.send("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello")

    def send(self, destination, path, interface, member, signature="", body=b""):
        self.serial += 1
        self.sock.sendall(method_call(self.serial, destination, path, interface, member, signature, body))

    def close(self):
        self.sock.close()
