// SPDX-License-Identifier: GPL-2.0-or-later
// Test only (installed by test_gnome_shell.py into the test user's home): reads the netactivity
// indicator's actors and answers over D-Bus, so the test needs no unsafe mode for Eval. Written as
// ES modules, as the extension is; scripts/gnome-extension.py writes the copy for GNOME Shell 43.
import Gio from 'gi://Gio';

import * as Main from 'resource:///org/gnome/shell/ui/main.js';
import {Extension} from 'resource:///org/gnome/shell/extensions/extension.js';

const XML = `<node><interface name="org.example.NetActivityTest">
  <method name="Indicator"><arg type="s" direction="out"/></method>
  <method name="OpenMenu"><arg type="s" direction="out"/></method>
  <method name="CloseMenu"/>
  <method name="Click"><arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="b" direction="out"/></method>
  <method name="StatusArea"><arg type="s" direction="out"/></method>
  <method name="OpenStatusMenu"><arg type="s" direction="in"/><arg type="s" direction="out"/></method>
  <method name="CloseStatusMenu"><arg type="s" direction="in"/></method>
</interface></node>`;

function indicator() {
    return Main.panel.statusArea['netactivity@example.org'] ?? null;
}

export default class Probe extends Extension {
    enable() {
        this._object = Gio.DBusExportedObject.wrapJSObject(XML, this);
        this._object.export(Gio.DBus.session, '/org/example/NetActivityTest');
    }

    disable() {
        this._object.unexport();
    }

    // The indicator as drawn: in the panel, mapped, where (stage pixels), and its model's view.
    Indicator() {
        const i = indicator();
        if (!i)
            return 'null';
        const [x, y] = i.get_transformed_position();
        const [width, height] = i.get_transformed_size();
        return JSON.stringify({
            inPanel: Main.panel._rightBox.contains(i.container), mapped: i.is_mapped(),
            x, y, width, height, ...i.describe(),
        });
    }

    // Opens the menu and answers the texts of its items as drawn.
    OpenMenu() {
        const i = indicator();
        i.menu.open(false);
        return JSON.stringify(i.menu._getMenuItems().map(item => item.label?.text ?? null));
    }

    CloseMenu() {
        indicator()?.menu.close(false);
    }

    // Clicks a task row's button in the open menu ('cancel', 'pause', 'resume'): whether it was there.
    Click(path, action) {
        return indicator()?.click(path, action) ?? false;
    }

    // Every top-bar button by its status-area key, as drawn (for other extensions' indicators,
    // such as the AppIndicator extension's tray items).
    StatusArea() {
        const out = {};
        for (const [key, button] of Object.entries(Main.panel.statusArea)) {
            const [x, y] = button.get_transformed_position();
            const [width, height] = button.get_transformed_size();
            out[key] = {visible: button.visible, mapped: button.is_mapped(), x, y, width, height,
                container: button.container?.visible ?? null,
                // The AppIndicator extension's items: whether its proxy for the item came up.
                ready: typeof button.isReady === 'function' ? !!button.isReady() : null};
        }
        return JSON.stringify(out);
    }

    // Opens the menu of the button at `key` (left open) and answers its items' texts (submenus flattened).
    OpenStatusMenu(key) {
        const button = Main.panel.statusArea[key];
        if (!button?.menu)
            return 'null';
        button.menu.open(false);
        const texts = [];
        const walk = menu => {
            for (const item of menu._getMenuItems()) {
                texts.push(item.label?.text ?? null);
                if (item.menu)
                    walk(item.menu);
            }
        };
        walk(button.menu);
        return JSON.stringify(texts);
    }

    CloseStatusMenu(key) {
        Main.panel.statusArea[key]?.menu?.close(false);
    }
}
