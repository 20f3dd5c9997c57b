#!/bin/sh
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# Builds dist/netactivity_VERSION_ARCH.deb: a release build with the Swift runtime linked
# statically (it runs on a Debian with no Swift toolchain), installed with `make install
# PREFIX=/usr` into a staging root, dependencies from dpkg-shlibdeps. Then lintian, which must
# report no errors. Prints the package's path last.
set -eu
cd "$(dirname "$0")/.."
VERSION=$(sed -n '1s/^netactivity (\([^)]*\)).*/\1/p' packaging/changelog)
ARCH=$(dpkg --print-architecture)
SCRATCH=.build-deb
# Run from make test beside other jobs: the make calls below are make runs of their own.
unset MAKEFLAGS MFLAGS
# SwiftPM's temporary folders stay in the build tree (see the Makefile).
mkdir -p .build/tmp
export TMPDIR="$PWD/.build/tmp"
# DEB_JOBS: how many compile jobs at once (swift build's default, one per core, unless given).
# DEB_XZ_LEVEL: xz's level for the packages (dpkg-deb's default, 6, unless given; make test, which
# unpacks and installs them and ships nothing, takes 1: the same files, a second instead of twelve).
FLAGS="-c release --static-swift-stdlib --disable-local-rpath -Xlinker -z -Xlinker now --scratch-path $SCRATCH${DEB_JOBS:+ -j $DEB_JOBS}"
# shellcheck disable=SC2086
swift build $FLAGS --product netactivityd >&2
# --agent-only: just the packaged agent, in $SCRATCH/release (make bench measures its idle RSS).
[ "${1:-}" = "--agent-only" ] && exit 0
# shellcheck disable=SC2086
swift build $FLAGS --product netactivity >&2
# --binaries: the two release binaries alone (make test builds them at idle priority from its start).
[ "${1:-}" = "--binaries" ] && exit 0
# The decoder is C, built by make (see the Makefile), beside the release binaries.
make -s decoder >&2
install -m 0755 .build/decoder/netactivity-decoder "$SCRATCH/release/"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
STAGE=$WORK/root
make -s install PREFIX=/usr DESTDIR="$STAGE" INSTALL_BIN="$SCRATCH/release" >&2
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
LIBNAME=$(make -s --no-print-directory print-lib-file)
LIBFILE=$STAGE/usr/lib/$MULTIARCH/$LIBNAME
strip --strip-unneeded "$STAGE/usr/bin/netactivityd" "$STAGE/usr/bin/netactivity" \
    "$STAGE/usr/libexec/netactivity/netactivity-decoder" "$LIBFILE"
DOC=$STAGE/usr/share/doc/netactivity
install -m 0644 packaging/copyright "$DOC/copyright"
gzip -9n < packaging/changelog > "$DOC/changelog.gz"  # a native package
gzip -9n "$DOC/README.md" "$DOC/CHANGELOG.md" "$DOC"/docs/*.md
gzip -9n "$STAGE/usr/share/man/man1/netactivity.1" "$STAGE/usr/share/man/man1/netactivityd.1" \
    "$STAGE/usr/share/man/man5/netactivityd.conf.5"
chmod 0644 "$DOC/changelog.gz" "$DOC/README.md.gz" "$DOC/CHANGELOG.md.gz" "$DOC"/docs/*.md.gz "$STAGE"/usr/share/man/man1/*.gz \
    "$STAGE"/usr/share/man/man5/*.gz

# libnetactivity-1 goes into packages of its own, as Debian splits a library: the shared library
# (libnetactivity-1-0), its typelib (gir1.2-netactivity-1.0), and what building against it needs
# (libnetactivity-1-dev: headers, the .so link, pkg-config file, GIR). part NAME PATH...: moves
# PATHs (under usr/) from the agent's root into NAME's, with its copyright and changelog.
part() {
    local name=$1 path
    shift
    for path in "$@"; do
        mkdir -p "$WORK/$name/$(dirname "$path")"
        mv "$STAGE/$path" "$WORK/$name/$path"
    done
    install -d "$WORK/$name/usr/share/doc/$name"
    install -m 0644 packaging/copyright "$WORK/$name/usr/share/doc/$name/copyright"
    install -m 0644 "$DOC/changelog.gz" "$WORK/$name/usr/share/doc/$name/changelog.gz"
}
LIBDIR=usr/lib/$MULTIARCH
# The GNOME Shell extension, in two packages with the same files, each for the shells its form
# loads (Conflicts each other): ES modules for 45 to 50, the older form for 43 and 44 (make
# extension writes both). apt installs the one the system's gnome-shell satisfies.
EXT=usr/share/gnome-shell/extensions/netactivity@example.org
part gnome-shell-extension-netactivity usr/share/gnome-shell
rm -rf "$WORK/gnome-shell-extension-netactivity/$EXT"
cp -r .build/gnome-shell/45/netactivity@example.org "$WORK/gnome-shell-extension-netactivity/$EXT"
install -d "$WORK/gnome-shell-extension-netactivity-legacy/$(dirname "$EXT")" \
    "$WORK/gnome-shell-extension-netactivity-legacy/usr/share/doc/gnome-shell-extension-netactivity-legacy"
cp -r .build/gnome-shell/43/netactivity@example.org "$WORK/gnome-shell-extension-netactivity-legacy/$EXT"
install -m 0644 packaging/copyright "$DOC/changelog.gz" \
    "$WORK/gnome-shell-extension-netactivity-legacy/usr/share/doc/gnome-shell-extension-netactivity-legacy/"
for e in gnome-shell-extension-netactivity gnome-shell-extension-netactivity-legacy; do
    find "$WORK/$e/usr" -type d -exec chmod 0755 {} + && find "$WORK/$e/usr" -type f -exec chmod 0644 {} +
done
part libnetactivity-1-0 "$LIBDIR/$LIBNAME" "$LIBDIR/libnetactivity-1.so.0"
part gir1.2-netactivity-1.0 "$LIBDIR/girepository-1.0"
part libnetactivity-1-dev usr/include "$LIBDIR/libnetactivity-1.so" "$LIBDIR/pkgconfig" usr/share/gir-1.0 \
    usr/share/doc/libnetactivity-1 usr/share/devhelp
# The examples, where Debian keeps a package's (its own doc folder).
mv "$WORK/libnetactivity-1-dev/usr/share/doc/libnetactivity-1/examples" "$WORK/libnetactivity-1-dev/usr/share/doc/libnetactivity-1-dev/"
rmdir "$STAGE/$LIBDIR" 2>/dev/null || true
LIBFILE=$WORK/libnetactivity-1-0/$LIBDIR/$LIBNAME

# dpkg-shlibdeps wants to run in a source tree: give it a minimal one.
mkdir -p "$WORK/src/debian"
printf 'Source: netactivity\n\nPackage: netactivity\nArchitecture: any\n' > "$WORK/src/debian/control"
shlibdeps() { (cd "$WORK/src" && dpkg-shlibdeps -O "$@" 2>/dev/null | sed -n 's/^shlibs:Depends=//p'); }
DEPENDS=$(shlibdeps -e"$STAGE/usr/bin/netactivityd" -e"$STAGE/usr/bin/netactivity" \
    -e"$STAGE/usr/libexec/netactivity/netactivity-decoder")
# libcurl is loaded with dlopen at the first download, so dpkg-shlibdeps cannot see it:
# CURLOPT_PROTOCOLS_STR, which the downloader sets, came in 7.85.
DEPENDS="$DEPENDS, libcurl4 (>= 7.85.0)"
# GIO, for the desktop's proxy settings, is loaded the same way; without it (or without
# glib-networking's resolvers) downloads go straight to their servers: Recommends.
# The decoder loads libavif and libjxl by the sonames it was built against (they change between
# Debian releases); without them it reads no AVIF or JPEG XL: Recommends, so that a package built
# here installs on the next release too.
owner() { dpkg -S "*/$(scripts/soname.sh "$1")" 2>/dev/null | head -n1 | cut -d: -f1; }
# librsvg, for SVG, is loaded the same way (its soname is the same in both releases).
DECODER_RECOMMENDS=$( (for lib in libavif libjxl; do owner $lib; done; echo librsvg2-2) | paste -sd, | sed 's/,/, /g')
LIB_DEPENDS=$(shlibdeps -e"$LIBFILE")

# control NAME [ARCH]: the common fields of package NAME's control file, and its md5sums.
control() {
    local root=$WORK/$1
    [ "$1" = netactivity ] && root=$STAGE
    mkdir -p "$root/DEBIAN"
    (cd "$root" && find usr etc -type f -print0 2>/dev/null | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
    printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: %s\nInstalled-Size: %s\nPriority: optional\nHomepage: %s\n' \
        "$1" "$VERSION" "${2:-$ARCH}" "netactivity developers <netactivity@example.org>" \
        "$(du -sk "$root/usr" | awk '{print $1}')" "https://example.org/netactivity" > "$root/DEBIAN/control"
}

# The autostart entry is in /etc: a conffile (the user's edits survive upgrades).
mkdir -p "$STAGE/DEBIAN"
(cd "$STAGE" && find etc -type f | sed 's|^|/|') > "$STAGE/DEBIAN/conffiles"
control netactivity
cat >> "$STAGE/DEBIAN/control" <<CONTROL
Depends: $DEPENDS
Recommends: dbus-user-session | dbus-x11, libglib2.0-0, glib-networking${DECODER_RECOMMENDS:+, $DECODER_RECOMMENDS}
Suggests: libnotify-bin, libnetactivity-1-dev, gnome-shell-extension-netactivity | gnome-shell-extension-netactivity-legacy
Section: net
Description: one D-Bus place for network activity on the desktop
 netactivityd is a session agent that every app tells when it uses the network
 (counts, leases, tasks with progress), and that decides with a delayed state
 machine when a network-activity indicator shows: in the tray, on waybar and
 polybar, on docks and in notifications. It also gives every app one shared
 image cache and one shared image downloader. The netactivity command shows
 and follows the indicator and runs commands as activity or as tasks.
CONTROL

LIB=$WORK/libnetactivity-1-0
control libnetactivity-1-0
# The dynamic linker's cache is refreshed after install and removal; apps built against the
# library depend on this package at this version or later.
echo "activate-noawait ldconfig" > "$LIB/DEBIAN/triggers"
echo "libnetactivity-1 0 libnetactivity-1-0 (>= $VERSION)" > "$LIB/DEBIAN/shlibs"
cat >> "$LIB/DEBIAN/control" <<CONTROL
Multi-Arch: same
Depends: $LIB_DEPENDS
Recommends: netactivity
Section: libs
Description: client library for the netactivity agent (GObject)
 libnetactivity-1 is the netactivity agent's client library for GTK apps: the
 agent's D-Bus interfaces as GObject proxies, its errors as a GError domain,
 images and decoded pixels as GBytes over the agent's shared memory, and
 activity leases as objects.
CONTROL

control gir1.2-netactivity-1.0
cat >> "$WORK/gir1.2-netactivity-1.0/DEBIAN/control" <<CONTROL
Multi-Arch: same
Depends: libnetactivity-1-0 (= $VERSION), gir1.2-glib-2.0
Section: introspection
Description: introspection data for libnetactivity-1
 The GObject introspection typelib of libnetactivity-1 (NetActivity-1.0), the
 netactivity agent's client library, for Python (PyGObject), JavaScript (GJS)
 and other languages that bind through introspection.
CONTROL

control libnetactivity-1-dev
cat >> "$WORK/libnetactivity-1-dev/DEBIAN/control" <<CONTROL
Multi-Arch: same
Depends: libnetactivity-1-0 (= $VERSION), gir1.2-netactivity-1.0 (= $VERSION), libglib2.0-dev
Section: libdevel
Description: client library for the netactivity agent (development files)
 Headers, pkg-config file (netactivity-1), GIR and API reference (HTML, with
 a devhelp index) of libnetactivity-1, the netactivity agent's client library
 for GTK apps.
CONTROL

extension_control() {  # extension_control NAME SHELLS DEPENDS OTHER
    control "$1" all
    cat >> "$WORK/$1/DEBIAN/control" <<CONTROL
Depends: netactivity (>= $VERSION), $3
Conflicts: $4
Replaces: $4
Enhances: gnome-shell
Section: gnome
Description: GNOME Shell extension for the netactivity agent (GNOME Shell $2)
 A top-bar indicator that shows while apps use the network, as the netactivity
 agent decides. Its menu lists the apps and the tasks with their progress, and
 cancels or pauses the tasks whose apps allow it. For GNOME Shell $2.
CONTROL
}
extension_control gnome-shell-extension-netactivity "45 to 50" "gnome-shell (>= 45~), gnome-shell (<< 51~)" \
    gnome-shell-extension-netactivity-legacy
extension_control gnome-shell-extension-netactivity-legacy "43 and 44" "gnome-shell (>= 43~), gnome-shell (<< 45~)" \
    gnome-shell-extension-netactivity

mkdir -p dist
for name in libnetactivity-1-0 gir1.2-netactivity-1.0 libnetactivity-1-dev gnome-shell-extension-netactivity \
    gnome-shell-extension-netactivity-legacy netactivity; do
    root=$WORK/$name
    [ "$name" = netactivity ] && root=$STAGE
    arch=$ARCH
    case $name in gnome-shell-extension-*) arch=all ;; esac
    out=dist/${name}_${VERSION}_${arch}.deb
    dpkg-deb --root-owner-group -Zxz${DEB_XZ_LEVEL:+ -z$DEB_XZ_LEVEL} --build "$root" "$out" >&2
    if command -v lintian >/dev/null 2>&1; then
        # Errors fail the build; warnings are shown.
        lintian --fail-on error "$out" >&2
    fi
done
echo "$out"
