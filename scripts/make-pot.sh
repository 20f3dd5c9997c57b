#!/bin/sh
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# Writes the message template (argument 1) from every tr("...") in Sources/ and every _('...') of
# the GNOME Shell extension. Swift sources go through xgettext's C lexer, which is enough for the
# plain literals tr() takes; it warns about Swift's multi-line strings elsewhere in a file.
set -eu
cd "$(dirname "$0")/.."
out=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common="--add-location=file --from-code=UTF-8 --add-comments=TRANSLATORS: --package-name=netactivity --package-version=1.0.0 --msgid-bugs-address=netactivity@example.org --sort-by-file --no-wrap"
# shellcheck disable=SC2046,SC2086
xgettext --language=C --keyword= --keyword=tr $common -o "$tmp/swift.pot" \
    $(grep -l '\btr("' $(find Sources -name '*.swift' | sort)) 2>&1 | grep -v "unterminated" >&2 || true
# shellcheck disable=SC2086
xgettext --language=JavaScript --keyword= --keyword=_ $common -o "$tmp/js.pot" \
    desktop/gnome-shell/netactivity@example.org/*.js
msgcat --no-wrap --sort-by-file "$tmp/swift.pot" "$tmp/js.pot" | sed '/^"POT-Creation-Date:/d' > "$out"
