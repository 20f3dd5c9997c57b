// SPDX-License-Identifier: GPL-2.0-or-later
// netactivity: a top-bar indicator that follows the netactivity agent (org.example.NetActivity).
// Shown while the agent's Visible is true; its menu lists the apps using the network and the
// running tasks with their progress. Follows the agent across restarts; costs nothing while the
// agent is away (a name watch only). GNOME Shell 43 and 44.
'use strict';
/* exported init */

const {Gio, GLib, GObject, St} = imports.gi;
const Main = imports.ui.main;
const PanelMenu = imports.ui.panelMenu;
const PopupMenu = imports.ui.popupMenu;
const ExtensionUtils = imports.misc.extensionUtils;
const Me = ExtensionUtils.getCurrentExtension();
const Model = Me.imports.model;
const _ = ExtensionUtils.gettext;

const PROPS_IFACE = 'org.freedesktop.DBus.Properties';
const MANAGER_IFACE = 'org.freedesktop.DBus.ObjectManager';
// The menu is rebuilt at most this often while open (task progress arrives up to 10 times a second
// per task).
const MENU_REFRESH_MS = 250;
// A task row's progress bar, in logical pixels.
const BAR_WIDTH = 240;
const BAR_HEIGHT = 4;

/** A menu row: its text, and under it a progress bar when the row has a fraction (0 to 1). */
function menuRow(row) {
    if (!(row.fraction >= 0))
        return [new PopupMenu.PopupMenuItem(row.text, {reactive: false}), null];
    const item = new PopupMenu.PopupBaseMenuItem({reactive: false});
    const box = new St.BoxLayout({vertical: true, x_expand: true});
    // As a PopupMenuItem has it: the label is the item's text, for screen readers too.
    item.label = new St.Label({text: row.text});
    item.label_actor = item.label;
    box.add_child(item.label);
    const bar = new St.Widget({
        style: `width: ${BAR_WIDTH}px; height: ${BAR_HEIGHT}px; margin-top: 6px; border-radius: 2px; ` +
            'background-color: rgba(128, 128, 128, 0.4);',
    });
    const filled = Math.round(BAR_WIDTH * Math.min(1, row.fraction));
    bar.add_child(new St.Widget({
        style: `width: ${filled}px; height: ${BAR_HEIGHT}px; border-radius: 2px; background-color: #3584e4;`,
    }));
    box.add_child(bar);
    item.add_child(box);
    return [item, {fraction: row.fraction, filled, width: BAR_WIDTH}];
}

const Indicator = GObject.registerClass(
class NetActivityIndicator extends PanelMenu.Button {
    _init() {
        super._init(0.0, _('Network activity'));
        // The project's symbolic icon from the icon theme (make install puts it in hicolor), else
        // the extension's own copy; the count lives in the menu, so the icon never changes width.
        this.add_child(new St.Icon({
            gicon: new Gio.ThemedIcon({name: 'netactivity-symbolic'}),
            fallback_gicon: Gio.icon_new_for_string(Me.dir.get_child('icons').get_child('netactivity-symbolic.svg').get_path()),
            style_class: 'system-status-icon',
        }));
        this.visible = false;

        this._state = Model.emptyState();
        this._generation = 0;
        this._subscriptions = [];
        this._cancellable = null;
        this._menuTimeout = 0;
        this.menu.connect('open-state-changed', (menu, open) => {
            if (open)
                this._rebuildMenu();
        });
        this._rebuildMenu();
        this._watch = Gio.bus_watch_name_on_connection(Gio.DBus.session, Model.AGENT_NAME,
            Gio.BusNameWatcherFlags.NONE,
            (connection, name, owner) => this._appeared(connection, owner),
            () => this._vanished());
    }

    // The agent's unique name is the only sender believed: no other client can fake its signals.
    _appeared(connection, owner) {
        this._vanished();
        const generation = this._generation;
        this._cancellable = new Gio.Cancellable();
        const subscribe = (iface, member, path, handler) => this._subscriptions.push(
            connection.signal_subscribe(owner, iface, member, path, null,
                Gio.DBusSignalFlags.NONE, (c, sender, objectPath, i, m, params) => {
                    if (generation === this._generation)
                        handler(objectPath, params.recursiveUnpack());
                }));
        subscribe(PROPS_IFACE, 'PropertiesChanged', null, (path, [iface, changed, invalidated]) => {
            if (iface === Model.AGENT_IFACE && path === Model.AGENT_PATH) {
                Model.applyAgent(this._state, changed);
                // Reasons comes without its value: each reader may see different rows.
                if (invalidated.includes('Reasons'))
                    getReasons();
            } else if (iface === Model.TASK_IFACE)
                Model.applyTask(this._state, path, changed);
            this._changed();
        });
        subscribe(MANAGER_IFACE, 'InterfacesAdded', Model.AGENT_PATH, (p, [path, interfaces]) => {
            if (interfaces[Model.TASK_IFACE])
                Model.applyTask(this._state, path, interfaces[Model.TASK_IFACE]);
            this._changed();
        });
        subscribe(MANAGER_IFACE, 'InterfacesRemoved', Model.AGENT_PATH, (p, [path, interfaces]) => {
            if (interfaces.includes(Model.TASK_IFACE))
                Model.removeTask(this._state, path);
            this._changed();
        });
        // Asked after subscribing: the bus delivers the agent's messages in order, so the answers
        // are newer than any signal before them and older than any after.
        const call = (path, iface, method, args, type, handler) => connection.call(owner, path, iface,
            method, args, new GLib.VariantType(type), Gio.DBusCallFlags.NONE, 5000, this._cancellable,
            (c, result) => {
                let reply;
                try {
                    reply = c.call_finish(result).recursiveUnpack();
                } catch (e) {
                    if (!e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.CANCELLED))
                        log(`netactivity: ${method}: ${e.message}`);
                    return;
                }
                if (generation === this._generation) {
                    handler(reply);
                    this._changed();
                }
            });
        const getReasons = () => call(Model.AGENT_PATH, PROPS_IFACE, 'Get',
            new GLib.Variant('(ss)', [Model.AGENT_IFACE, 'Reasons']), '(v)',
            ([reasons]) => Model.applyAgent(this._state, {Reasons: reasons}));
        call(Model.AGENT_PATH, PROPS_IFACE, 'GetAll', new GLib.Variant('(s)', [Model.AGENT_IFACE]),
            '(a{sv})', ([props]) => {
                this._state.online = true;
                Model.applyAgent(this._state, props);
            });
        call(Model.AGENT_PATH, MANAGER_IFACE, 'GetManagedObjects', null, '(a{oa{sa{sv}}})',
            ([objects]) => {
                for (const [path, interfaces] of Object.entries(objects)) {
                    if (interfaces[Model.TASK_IFACE])
                        Model.applyTask(this._state, path, interfaces[Model.TASK_IFACE]);
                }
            });
    }

    _vanished() {
        this._generation++;
        this._cancellable?.cancel();
        this._cancellable = null;
        for (const id of this._subscriptions)
            Gio.DBus.session.signal_unsubscribe(id);
        this._subscriptions = [];
        this._state = Model.emptyState();
        this._changed();
    }

    _changed() {
        const view = Model.view(this._state);
        if (this.visible !== view.shown)
            this.visible = view.shown;
        if (!view.shown && this.menu.isOpen)
            this.menu.close();
        if (this.menu.isOpen && this._menuTimeout === 0) {
            this._menuTimeout = GLib.timeout_add(GLib.PRIORITY_DEFAULT, MENU_REFRESH_MS, () => {
                this._menuTimeout = 0;
                this._rebuildMenu();
                return GLib.SOURCE_REMOVE;
            });
        }
    }

    _rebuildMenu() {
        this.menu.removeAll();
        this._bars = [];
        Model.view(this._state).sections.forEach((section, index) => {
            if (section.title || index > 0)
                this.menu.addMenuItem(new PopupMenu.PopupSeparatorMenuItem(section.title));
            for (const row of section.rows) {
                const [item, bar] = menuRow(row);
                this.menu.addMenuItem(item);
                if (bar)
                    this._bars.push(bar);
            }
        });
    }

    /** What the indicator shows, for tests and the curious (Looking Glass). */
    describe() {
        return {
            visible: this.visible,
            online: this._state.online,
            menu: Model.view(this._state).sections,
            // The progress bars the menu drew when it was last built.
            bars: this._bars,
        };
    }

    destroy() {
        Gio.bus_unwatch_name(this._watch);
        this._vanished();
        if (this._menuTimeout !== 0)
            GLib.source_remove(this._menuTimeout);
        this._menuTimeout = 0;
        super.destroy();
    }
});

class Extension {
    enable() {
        this._indicator = new Indicator();
        Main.panel.addToStatusArea(Me.metadata.uuid, this._indicator);
    }

    disable() {
        this._indicator.destroy();
        this._indicator = null;
    }
}

function init() {
    // The catalogs of the extension's own locale folder (make install puts them there), in the
    // agent's domain ("netactivity", metadata.json's gettext-domain).
    ExtensionUtils.initTranslations();
    Model.setGettext(ExtensionUtils.gettext);
    return new Extension();
}
