#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A decoder that lies: it speaks netactivity-decoder's wire (decoder_protocol.h) and answers every
request with DECODER_OK and the sizes given on its command line, whatever the image, with a sealed
memfd of `bytes` bytes. Tests start it through a wrapper script named by NETACTIVITY_DECODER.

lying_decoder.py WIDTH HEIGHT STRIDE BYTES [SEALS]  (SEALS: "all" (default) or "none")"""
import fcntl
import os
import socket
import struct
import sys

REQUEST = struct.Struct("=IIQIIQQII")         # magic, version, id, max_width, max_height, max_pixels, max_source_pixels, flags, reserved
REPLY = struct.Struct("=IIQIIIIIIIIIIII200s")  # magic, status, id, width, height, stride, ow, oh, format, colour profile, colour space, frames, frames sent, loop count, reserved, message
REQUEST_MAGIC, REPLY_MAGIC = 0x5144414E, 0x5244414E
OK, READY, FORMAT = 0, 5, 1

width, height, stride, size = (int(v, 0) for v in sys.argv[1:5])
seals = sys.argv[5] if len(sys.argv) > 5 else "all"
sock = socket.socket(fileno=0)
sock.sendmsg([REPLY.pack(REPLY_MAGIC, READY, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b"a lying test decoder")])
while True:
    data, fds, _, _ = socket.recv_fds(sock, REQUEST.size, 1)
    if not data:
        break
    for fd in fds:
        os.close(fd)
    request_id = REQUEST.unpack(data)[2]
    memfd = os.memfd_create("lie", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(memfd, size)
    if seals == "all":
        fcntl.fcntl(memfd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    socket.send_fds(sock, [REPLY.pack(REPLY_MAGIC, OK, request_id, width, height, stride, width, height, FORMAT, 0, 0, 1, 1, 0, 0,
                                      b"")], [memfd])
    os.close(memfd)
