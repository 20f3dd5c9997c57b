#!/bin/sh
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# debian13-root.sh ROOT: a Debian 13 (trixie) root with GNOME Shell 48 in ROOT, made once with
# mmdebstrap (about a minute and 1.1 GB here) from this machine's Debian mirror, and kept: the
# GNOME Shell tests run the shell in it with bubblewrap.
# debian13-root.sh --base ROOT: a small one (a bus, GLib's gdbus, bubblewrap; about 150 MB) with
# apt's package lists kept, which the package tests copy and install the packages into with apt.
# Prints ROOT. A root left half-made (no ROOT/.complete) is made again.
set -eu
base=""
if [ "$1" = --base ]; then base=1; shift; fi
root=$1
[ -f "$root/.complete" ] && { echo "$root"; exit 0; }
command -v mmdebstrap >/dev/null 2>&1 && command -v bwrap >/dev/null 2>&1 || {
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap bubblewrap >&2
}
# The mirror this machine's apt uses (deb.debian.org when none is named).
mirror=$(sed -n 's/^URIs: *\([^ ]*debian\)\/\{0,1\}$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
[ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(http[^ ]*debian\)\/\{0,1\} .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -n1)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
rm -rf "$root"
mkdir -p "$(dirname "$root")"
# GNOME Shell with what a session has (dconf for its settings, a bus), and what the package's
# own dependencies and tests need (apt installs the package's dependencies from the mirror).
if [ -n "$base" ]; then
    mmdebstrap --quiet --variant=apt --skip=cleanup/apt/lists \
        --include=dbus-daemon,dbus-bin,libglib2.0-bin,bubblewrap,ca-certificates trixie "$root" "$mirror" >&2
else
    mmdebstrap --quiet --variant=apt \
        --include=gnome-shell,dbus-daemon,dbus-bin,dconf-service,dconf-gsettings-backend,libglib2.0-bin,gjs,python3,ca-certificates,bubblewrap \
        trixie "$root" "$mirror" >&2
fi
touch "$root/.complete"
echo "$root"
