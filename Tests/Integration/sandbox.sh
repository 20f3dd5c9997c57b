#!/bin/sh
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# sandbox.sh ROOT APP_ID CMD...: runs CMD as a fake Flatpak app, the way a test can make one with
# no privilege: inside `unshare -rm` (a user and a mount namespace of its own), a tmpfs ROOT with
# every top-level folder of / bound into it, a /.flatpak-info naming APP_ID (sharing what
# SANDBOX_SHARED lists; by default network and ipc), and chroot. The agent
# reads /proc/PID/root/.flatpak-info, as xdg-desktop-portal does, and sees APP_ID.
set -e
root=$1 app=$2
shift 2
mount -t tmpfs tmpfs "$root"
for entry in /*; do
    name=${entry#/}
    if [ -L "$entry" ]; then
        ln -s "$(readlink "$entry")" "$root/$name"
    elif [ -d "$entry" ]; then
        mkdir -p "$root/$name"
        mount --rbind "$entry" "$root/$name"
    fi
done
printf '[Application]\nname=%s\nruntime=runtime/org.example.Platform/x86_64/1\n\n[Context]\nshared=%s\n' \
    "$app" "${SANDBOX_SHARED-network;ipc;}" > "$root/.flatpak-info"
exec chroot "$root" "$@"
