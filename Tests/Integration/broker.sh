#!/bin/sh
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# broker.sh DIR CONFIG: a private dbus-broker session bus at DIR/bus with the session configuration
# CONFIG (the stock one by default), as dbus-broker-launch runs it
# under systemd (socket activation), in a mount namespace of its own whose /run is a tmpfs holding
# the journal socket the launcher logs to. Root only. Runs until killed (kill its process group).
set -e
dir=$1
config=${2:-/usr/share/dbus-1/session.conf}
exec unshare -m --propagation private sh -c '
    set -e
    mount -t tmpfs tmpfs /run
    mkdir -p /run/systemd/journal
    /usr/bin/python3 -c "
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(\"/run/systemd/journal/socket\")
while True:
    s.recv(1 << 16)
" &
    while [ ! -S /run/systemd/journal/socket ]; do sleep 0.01; done
    exec systemd-socket-activate -l "$1/bus" -E "DBUS_SESSION_BUS_ADDRESS=unix:path=$1/bus" \
        dbus-broker-launch --scope user --config-file "$2"
' sh "$dir" "$config"
