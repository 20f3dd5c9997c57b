#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The bench's local image server: /small/N.png (about 1 KiB, no validator: the disk tier does not keep
it), /tagged/N.png (the same with an ETag: kept on disk), /fresh/N.png (the same, cacheable for an
hour), /large/N.png (4 MiB, with an ETag: kept on disk, as a CDN's images are), /slow/NAME.png
(answers after 0.3 s, for coalescing), /files/NAME/ANY (the file NAME of the folder given as the
first argument, for the decoded-pixels rows), /count (requests served so far). Prints its port."""
import os
import http.server
import socket
import struct
import sys
import threading
import time
import zlib


def png(extra=0):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + b"\x10\x20\x30\xff" * 16 for _ in range(16))
    body = chunk(b"IHDR", struct.pack(">IIBBBBB", 16, 16, 8, 6, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows))
    if extra:
        body += chunk(b"prVt", b"\xa5" * extra)
    return b"\x89PNG\r\n\x1a\n" + body + chunk(b"IEND", b"")


SMALL, LARGE = png(900), png(4 * 1024 * 1024)
FILES = {}
if len(sys.argv) > 1:
    for name in os.listdir(sys.argv[1]):
        with open(os.path.join(sys.argv[1], name), "rb") as f:
            FILES[name] = f.read()
lock = threading.Lock()
served = [0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle and delayed ACKs put
        # 40 ms on every keep-alive response and the server, not the clients, sets the pace.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/count":
            body = str(served[0]).encode()
        else:
            with lock:
                served[0] += 1
            if self.path.startswith("/slow/"):
                time.sleep(0.3)
            body = LARGE if self.path.startswith("/large/") else SMALL
            if self.path.startswith("/files/") and FILES:
                body = FILES.get(self.path.split("/")[2], b"")
        self.send_response(200)
        if self.path.startswith("/fresh/"):
            self.send_header("Cache-Control", "max-age=3600")
        if self.path.startswith("/large/") or self.path.startswith("/tagged/"):
            self.send_header("ETag", '"v1"')
        self.send_header("Content-Type", "image/jpeg" if ".jpg/" in self.path else "image/png")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
