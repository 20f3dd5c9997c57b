// Test only (installed by test_gnome_shell.py into the test user's home): reads the netactivity
// indicator's actors and answers over D-Bus, so the test needs no unsafe mode for Eval.
'use strict';
/* exported init */
const {Gio} = imports.gi;
const Main = imports.ui.main;

const XML = `<node><interface name="org.example.NetActivityTest">
  <method name="Indicator"><arg type="s" direction="out"/></method>
  <method name="OpenMenu"><arg type="s" direction="out"/></method>
  <method name="CloseMenu"/>
</interface></node>`;

function indicator() {
    return Main.panel.statusArea['netactivity@example.org'] ?? null;
}

class Probe {
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
}

function init() {
    return new Probe();
}
