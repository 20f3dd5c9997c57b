#!/bin/sh
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# docs/pictures/: the indicator as the tests show it (make pictures). The tests that look at the
# real GNOME Shell, its AppIndicator tray and waybar keep their screenshots (NETACTIVITY_SCREENSHOTS);
# this cuts out the part a reader needs and keeps the PNGs small (a palette, no metadata).
set -eu
shots=.build/pictures
rm -rf "$shots"
mkdir -p "$shots" docs/pictures
NETACTIVITY_SCREENSHOTS=$PWD/$shots /usr/bin/python3 Tests/Integration/run.py --bin .build/debug \
    -k test_1_follows_visible_clients_and_tasks -k test_the_tray_item_shows_with_its_menu_while_visible \
    -k test_the_documented_include_line_shows_the_indicator_on_a_real_waybar
# cut SHOT GEOMETRY PICTURE: a 1280x800 GNOME screen's top right, or the bar.
cut() {
    convert "$shots/$1" -crop "$2" +repage -strip -colors 64 "PNG8:docs/pictures/$3"
}
cut gnome-menu.png 330x200+950+0 gnome-menu.png
cut gnome-appindicator-menu.png 250x265+1030+0 tray-menu.png
cut waybar-active.png 640x30+0+0 waybar.png
ls -l docs/pictures
