#!/bin/sh
# Builds dist/netactivity_VERSION_ARCH.deb: a release build with the Swift runtime linked
# statically (it runs on a Debian with no Swift toolchain), installed with `make install
# PREFIX=/usr` into a staging root, dependencies from dpkg-shlibdeps. Then lintian, which must
# report no errors. Prints the package's path last.
set -eu
cd "$(dirname "$0")/.."
VERSION=$(sed -n '1s/^netactivity (\([^)]*\)).*/\1/p' packaging/changelog)
ARCH=$(dpkg --print-architecture)
SCRATCH=.build-deb
# SwiftPM's temporary folders stay in the build tree (see the Makefile).
mkdir -p .build/tmp
export TMPDIR="$PWD/.build/tmp"
FLAGS="-c release --static-swift-stdlib --disable-local-rpath -Xlinker -z -Xlinker now --scratch-path $SCRATCH"
# shellcheck disable=SC2086
swift build $FLAGS --product netactivityd >&2
# --agent-only: just the packaged agent, in $SCRATCH/release (make bench measures its idle RSS).
[ "${1:-}" = "--agent-only" ] && exit 0
# shellcheck disable=SC2086
swift build $FLAGS --product netactivity >&2
# The decoder is C, built by make (see the Makefile), beside the release binaries.
make -s decoder >&2
install -m 0755 .build/decoder/netactivity-decoder "$SCRATCH/release/"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
STAGE=$WORK/root
make -s install PREFIX=/usr DESTDIR="$STAGE" INSTALL_BIN="$SCRATCH/release" >&2
strip --strip-unneeded "$STAGE/usr/bin/netactivityd" "$STAGE/usr/bin/netactivity" \
    "$STAGE/usr/libexec/netactivity/netactivity-decoder"
DOC=$STAGE/usr/share/doc/netactivity
install -m 0644 packaging/copyright "$DOC/copyright"
gzip -9n < packaging/changelog > "$DOC/changelog.gz"  # a native package
gzip -9n "$DOC/README.md" "$DOC"/docs/*.md
gzip -9n "$STAGE/usr/share/man/man1/netactivity.1" "$STAGE/usr/share/man/man1/netactivityd.1" \
    "$STAGE/usr/share/man/man5/netactivityd.conf.5"
chmod 0644 "$DOC/changelog.gz" "$DOC/README.md.gz" "$DOC"/docs/*.md.gz "$STAGE"/usr/share/man/man1/*.gz \
    "$STAGE"/usr/share/man/man5/*.gz

# dpkg-shlibdeps wants to run in a source tree: give it a minimal one.
mkdir -p "$WORK/src/debian"
printf 'Source: netactivity\n\nPackage: netactivity\nArchitecture: any\n' > "$WORK/src/debian/control"
DEPENDS=$(cd "$WORK/src" && dpkg-shlibdeps -O -e"$STAGE/usr/bin/netactivityd" -e"$STAGE/usr/bin/netactivity" \
    -e"$STAGE/usr/libexec/netactivity/netactivity-decoder" 2>/dev/null \
    | sed -n 's/^shlibs:Depends=//p')
# libcurl is loaded with dlopen at the first download, so dpkg-shlibdeps cannot see it:
# CURLOPT_PROTOCOLS_STR, which the downloader sets, came in 7.85.
DEPENDS="$DEPENDS, libcurl4 (>= 7.85.0)"

mkdir -p "$STAGE/DEBIAN"
# The autostart entry is in /etc: a conffile (the user's edits survive upgrades).
(cd "$STAGE" && find etc -type f | sed 's|^|/|') > "$STAGE/DEBIAN/conffiles"
(cd "$STAGE" && find usr etc -type f -print0 | sort -z | xargs -0 md5sum) > "$STAGE/DEBIAN/md5sums"
cat > "$STAGE/DEBIAN/control" <<CONTROL
Package: netactivity
Version: $VERSION
Architecture: $ARCH
Maintainer: netactivity developers <netactivity@example.org>
Installed-Size: $(du -sk "$STAGE/usr" "$STAGE/etc" | awk '{s += $1} END {print s}')
Depends: $DEPENDS
Recommends: dbus-user-session | dbus-x11
Suggests: libnotify-bin
Section: net
Priority: optional
Homepage: https://example.org/netactivity
Description: one D-Bus place for network activity on the desktop
 netactivityd is a session agent that every app tells when it uses the network
 (counts, leases, tasks with progress), and that decides with a delayed state
 machine when a network-activity indicator shows: in the tray, on waybar and
 polybar, on docks and in notifications. It also gives every app one shared
 image cache and one shared image downloader. The netactivity command shows
 and follows the indicator and runs commands as activity or as tasks.
CONTROL
mkdir -p dist
OUT=dist/netactivity_${VERSION}_${ARCH}.deb
dpkg-deb --root-owner-group -Zxz --build "$STAGE" "$OUT" >&2
if command -v lintian >/dev/null 2>&1; then
    # Errors fail the build; warnings are shown.
    lintian --fail-on error "$OUT" >&2
fi
echo "$OUT"
