#!/bin/sh
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# soname.sh PKG: the soname of pkg-config package PKG's library on this machine (what the decoder
# loads by name at run time: libavif.so.15 on Debian 12).
set -eu
lib=$(pkg-config --variable=libdir "$1")/$1.so
objdump -p "$(readlink -f "$lib")" | sed -n 's/^ *SONAME *//p'
