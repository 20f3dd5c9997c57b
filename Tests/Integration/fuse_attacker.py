#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A client whose files a FUSE server of its own holds up: fuse_attacker.py ADDRESS MODE, run in a
user and mount namespace of its own (`unshare -rm`), mounts a FUSE file system served by a thread
of this process (a raw /dev/fuse server: INIT, LOOKUP, GETATTR and OPEN of one file), connects to
the bus, and then makes the server stop answering (anything but closing a file) before it acts:

- `chroot`: chroots into the mount (its root is now the frozen FUSE root) and adds an image;
- `fd`: opens the mount's one file and passes it to AddImageFromFd;
- `hold`: connects to nothing; prints its pid at once (the test points a file of the agent's at
  /proc/PID/root/MOUNT/image.png, a way into this mount from outside its namespace).

It prints one JSON line, {"ok": ...} or {"error": [name, message]}, with the seconds the call
took, then waits for stdin to close; the server then stops (its /dev/fuse closed, which aborts
every request still waiting for it) and the process exits."""
import ctypes
import json
import os
import select
import socket
import struct
import sys
import time

import dbus

import contract

libc = ctypes.CDLL(None, use_errno=True)
LOOKUP, GETATTR, OPEN, READ, RELEASE, FLUSH, INIT = 1, 3, 14, 15, 18, 25, 26
ROOT, FILE = 1, 2
CONTENT = b"\x89PNG\r\n\x1a\n" + b"\0" * 100


def attr(node):
    mode = 0o40755 if node == ROOT else 0o100644
    size = 0 if node == ROOT else len(CONTENT)
    # ino size blocks atime mtime ctime atimensec mtimensec ctimensec mode nlink uid gid rdev blksize padding
    return struct.pack("<QQQQQQIIIIIIIIII", node, size, 1, 0, 0, 0, 0, 0, 0, mode, 1, 0, 0, 0, 4096, 0)


class Server:
    """The file system's server, in a process of its own (a client closing one of its files waits
    for the FLUSH answer, holding Python's lock if it were a thread of this process)."""

    def __init__(self, fd):
        self.fd = fd
        self.control_r, self.control_w = (s.detach() for s in socket.socketpair())
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.control_w)
            try:
                self.serve()
            finally:
                os._exit(0)
        os.close(self.control_r)

    def reply(self, unique, body=b"", error=0):
        os.write(self.fd, struct.pack("<IiQ", 16 + len(body), error, unique) + body)

    def serve(self):
        answering = True
        while True:
            ready, _, _ = select.select([self.fd, self.control_r], [], [])
            if self.control_r in ready:
                command = os.read(self.control_r, 1)
                if command in (b"", b"s"):
                    return
                answering = False
                os.write(self.control_r, b"k")
                continue
            try:
                request = os.read(self.fd, 1 << 20)
            except OSError:
                return
            length, opcode, unique, node = struct.unpack_from("<IIQQ", request)
            if opcode == INIT:
                # major, minor, max_readahead, flags, max_background, congestion_threshold, max_write
                self.reply(unique, struct.pack("<IIIIHHI", 7, 19, 65536, 0, 16, 12, 65536))
            elif opcode in (RELEASE, FLUSH):
                self.reply(unique)  # closing always works (or the bus daemon's own close would wait)
            elif not answering:
                continue  # frozen: the caller waits for ever
            elif opcode == LOOKUP:
                name = request[40:].split(b"\0")[0]
                if node == ROOT and name == b"image.png":
                    self.reply(unique, struct.pack("<QQQQII", FILE, 0, 60, 60, 0, 0) + attr(FILE))
                else:
                    self.reply(unique, error=-2)
            elif opcode == GETATTR:
                self.reply(unique, struct.pack("<QII", 60, 0, 0) + attr(node))
            elif opcode == OPEN:
                self.reply(unique, struct.pack("<QII", 1, 0, 0))
            elif opcode == READ:
                offset, size = struct.unpack_from("<QQI", request, 40)[1:]
                self.reply(unique, CONTENT[offset:offset + size])
            else:
                self.reply(unique, error=-38)

    def freeze(self):
        """Stops answering; returns once the server says it has."""
        os.write(self.control_w, b"f")
        assert os.read(self.control_w, 1) == b"k"

    def stop(self):
        os.write(self.control_w, b"s")
        os.waitpid(self.pid, 0)
        os.close(self.fd)  # the last /dev/fuse descriptor: the kernel aborts what still waits


def main():
    address, mode = sys.argv[1], sys.argv[2]
    mnt = os.environ["FUSE_MOUNT"]  # an empty folder the test made (and removes)
    fd = os.open("/dev/fuse", os.O_RDWR)
    options = "fd=%d,rootmode=40000,user_id=0,group_id=0" % fd
    if libc.mount(b"netactivity-test", mnt.encode(), b"fuse", 0, options.encode()) != 0:
        print(json.dumps({"error": ["mount", os.strerror(ctypes.get_errno())]}), flush=True)
        return
    server = Server(fd)
    if mode == "hold":
        server.freeze()
        print(json.dumps({"ok": os.getpid()}), flush=True)
        sys.stdin.read()
        server.stop()
        os._exit(0)
    conn = dbus.bus.BusConnection(address)
    obj = conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False)
    cache = dbus.Interface(obj, contract.ImageCache.INTERFACE)
    image = os.open(os.path.join(mnt, "image.png"), os.O_RDONLY) if mode == "fd" else None
    if mode == "chroot":
        os.chroot(mnt)
        os.chdir("/")
    server.freeze()
    start = time.monotonic()
    try:
        if mode == "chroot":
            cache.AddImage("from-fuse", dbus.ByteArray(bytes.fromhex(sys.argv[3])), timeout=60)
            out = {"ok": conn.get_unique_name()}
        else:
            cache.AddImageFromFd("from-fuse", dbus.types.UnixFd(image), timeout=60)
            out = {"ok": conn.get_unique_name()}
    except dbus.exceptions.DBusException as e:
        out = {"error": [e.get_dbus_name(), e.get_dbus_message()]}
    out["seconds"] = time.monotonic() - start
    print(json.dumps(out), flush=True)
    sys.stdin.read()
    server.stop()
    os._exit(0)


main()
