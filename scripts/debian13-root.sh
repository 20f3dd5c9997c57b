#!/bin/sh
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# debian13-root.sh ROOT: a Debian 13 (trixie) root with GNOME Shell 48 in ROOT, made once with
# mmdebstrap (about 100 s and 1.1 GB here) from this machine's Debian mirror, and kept: the tests
# that run GNOME Shell 48 and the package on Debian 13 (test_debian13.py) use it with bubblewrap.
# Prints ROOT. A root left half-made (no ROOT/.complete) is made again.
set -eu
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
mmdebstrap --quiet --variant=apt \
    --include=gnome-shell,dbus-daemon,dbus-bin,dconf-service,dconf-gsettings-backend,libglib2.0-bin,gjs,python3,ca-certificates,bubblewrap \
    trixie "$root" "$mirror" >&2
touch "$root/.complete"
echo "$root"
