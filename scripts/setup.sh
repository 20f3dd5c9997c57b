#!/bin/sh
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# Installs what building and testing netactivity needs and a fresh Debian machine lacks.
# Called by `make`; does nothing when everything is there.
set -eu
need=""
pkg-config --exists dbus-1 2>/dev/null || need="$need libdbus-1-dev"
pkg-config --exists libcurl 2>/dev/null || need="$need libcurl4-openssl-dev"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v dbus-daemon >/dev/null 2>&1 || need="$need dbus-daemon"
command -v busctl >/dev/null 2>&1 || need="$need systemd"
command -v gdbus >/dev/null 2>&1 || need="$need libglib2.0-bin"
command -v dbus-send >/dev/null 2>&1 || need="$need dbus-bin"
/usr/bin/python3 -c 'import dbus' 2>/dev/null || need="$need python3-dbus"
/usr/bin/python3 -c 'import gi' 2>/dev/null || need="$need python3-gi"
command -v systemd-analyze >/dev/null 2>&1 || need="$need systemd"
command -v desktop-file-validate >/dev/null 2>&1 || need="$need desktop-file-utils"
command -v groff >/dev/null 2>&1 || need="$need groff-base"
command -v msgfmt >/dev/null 2>&1 || need="$need gettext"
# The strangers' tests: a real Flatpak-like sandbox (bubblewrap and xdg-dbus-proxy).
command -v bwrap >/dev/null 2>&1 || need="$need bubblewrap"
command -v xdg-dbus-proxy >/dev/null 2>&1 || need="$need xdg-dbus-proxy"
# The integration suite runs on dbus-broker too (systemd-socket-activate comes with systemd).
command -v dbus-broker-launch >/dev/null 2>&1 || need="$need dbus-broker"
# The image decoder (netactivity-decoder): its formats and its sandbox.
pkg-config --exists spng 2>/dev/null || need="$need libspng-dev"
pkg-config --exists libjpeg 2>/dev/null || need="$need libjpeg62-turbo-dev"
pkg-config --exists libwebp 2>/dev/null || need="$need libwebp-dev"
pkg-config --exists libseccomp 2>/dev/null || need="$need libseccomp-dev"
[ -f /usr/include/gif_lib.h ] || need="$need libgif-dev"  # giflib ships no pkg-config file
pkg-config --exists libavif 2>/dev/null || need="$need libavif-dev"
pkg-config --exists libheif 2>/dev/null || need="$need libheif-dev"
pkg-config --exists libjxl 2>/dev/null || need="$need libjxl-dev"
pkg-config --exists lcms2 2>/dev/null || need="$need liblcms2-dev"
pkg-config --exists libwebpdemux 2>/dev/null || need="$need libwebp-dev"
# Their tests make each format's images with its own encoder.
command -v avifenc >/dev/null 2>&1 || need="$need libavif-bin"
command -v heif-enc >/dev/null 2>&1 || need="$need libheif-examples"
command -v cjxl >/dev/null 2>&1 || need="$need libjxl-tools"
command -v img2webp >/dev/null 2>&1 || need="$need webp"
pkg-config --exists librsvg-2.0 2>/dev/null || need="$need librsvg2-dev"  # its headers; loaded by name
command -v rsvg-convert >/dev/null 2>&1 || need="$need librsvg2-bin"
command -v cc >/dev/null 2>&1 || command -v clang >/dev/null 2>&1 || need="$need gcc"  # it is built with it
# The GTK 4 examples (C and PyGObject), shown in a window on Xvfb by the tests.
pkg-config --exists gtk4 2>/dev/null || need="$need libgtk-4-dev"
/usr/bin/python3 -c 'import gi; gi.require_version("Gtk", "4.0")' 2>/dev/null || need="$need gir1.2-gtk-4.0"
command -v Xvfb >/dev/null 2>&1 || need="$need xvfb"
# The waybar recipe on a real waybar, in a headless sway, its pixels taken by grim.
command -v sway >/dev/null 2>&1 || need="$need sway"
command -v waybar >/dev/null 2>&1 || need="$need waybar"
command -v grim >/dev/null 2>&1 || need="$need grim"
# libnetactivity-1: its GIR and typelib, and its API reference.
command -v g-ir-scanner >/dev/null 2>&1 || need="$need gobject-introspection libgirepository1.0-dev"
command -v gi-docgen >/dev/null 2>&1 || need="$need gi-docgen"
command -v gjs >/dev/null 2>&1 || need="$need gjs"
# The desktop's proxy settings as GLib's apps read them (GIO's resolver, loaded by the agent at its
# first download), and what the proxy tests change them with: GNOME's settings in dconf, PAC files
# through the session's PAC runner, which Debian 12's libproxy evaluates with its WebKit plugin
# (Debian 13's libproxy does so itself).
gio_modules=$(pkg-config --variable=giomoduledir gio-2.0 2>/dev/null || true)
[ -n "$gio_modules" ] && [ -f "$gio_modules/libgiognomeproxy.so" ] || need="$need glib-networking"
[ -n "$gio_modules" ] && [ -f "$gio_modules/libdconfsettings.so" ] || need="$need dconf-gsettings-backend"
[ -x /usr/libexec/dconf-service ] || need="$need dconf-service"
[ -x /usr/libexec/glib-pacrunner ] || need="$need glib-networking-services"
[ -f /usr/share/glib-2.0/schemas/org.gnome.system.proxy.gschema.xml ] || need="$need gsettings-desktop-schemas"
if dpkg-query -W -f '${Version}' libproxy1v5 2>/dev/null | grep -q '^0\.4'; then
    dpkg-query -W -f '${Status}' libproxy1-plugin-webkit 2>/dev/null | grep -q 'ok installed' \
        || need="$need libproxy1-plugin-webkit"
fi
# C bindings from the contract (gdbus-codegen), compiled and run by the tests.
pkg-config --exists gio-unix-2.0 2>/dev/null && command -v gdbus-codegen >/dev/null 2>&1 || need="$need libglib2.0-dev"
if [ "${1:-}" = "--bench" ]; then
    pkg-config --exists libsystemd 2>/dev/null || need="$need libsystemd-dev"
    command -v gcc >/dev/null 2>&1 || need="$need gcc"
    command -v taskset >/dev/null 2>&1 || need="$need util-linux"
    command -v valgrind >/dev/null 2>&1 || need="$need valgrind"
    # The decoded-pixels rows make their images with ImageMagick.
    convert -version 2>/dev/null | grep -q ImageMagick || need="$need imagemagick"
    command -v strip >/dev/null 2>&1 || need="$need binutils"
fi
if [ "${1:-}" = "--deb" ]; then
    command -v dpkg-shlibdeps >/dev/null 2>&1 || need="$need dpkg-dev"
    command -v lintian >/dev/null 2>&1 || need="$need lintian"
    command -v strip >/dev/null 2>&1 || need="$need binutils"
fi
# The GNOME Shell extension's test runs a real gnome-shell (headless): the shell with its
# recommends (the set this was tried with; about 400 MB to download), and ImageMagick to read pixels.
recommends="--no-install-recommends"
if [ "${1:-}" = "--gnome" ]; then
    need=""
    command -v gnome-shell >/dev/null 2>&1 || { need="$need gnome-shell"; recommends=""; }
    command -v gjs >/dev/null 2>&1 || need="$need gjs"
    # Ubuntu's tray in GNOME (enabled there by default): the tray item's test runs under it too.
    [ -d /usr/share/gnome-shell/extensions/ubuntu-appindicators@ubuntu.com ] || need="$need gnome-shell-extension-appindicator"
    # ImageMagick's own convert (a machine may have a stand-in of that name that reads only PNGs).
    convert -version 2>/dev/null | grep -q ImageMagick || need="$need imagemagick"
    # GNOME Shell 48 in a Debian 13 root (scripts/debian13-root.sh), run through bubblewrap.
    command -v mmdebstrap >/dev/null 2>&1 || need="$need mmdebstrap"
    command -v bwrap >/dev/null 2>&1 || need="$need bubblewrap"
fi
[ -z "$need" ] && exit 0
echo "setup: installing$need" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq $recommends $need >/dev/null
