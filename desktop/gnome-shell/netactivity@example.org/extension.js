// SPDX-License-Identifier: GPL-2.0-or-later
// netactivity: a top-bar indicator that follows the netactivity agent (org.example.NetActivity).
// Shown while the agent's Visible is true; its menu lists the apps using the network and the
// running tasks with their progress. Follows the agent across restarts; costs nothing while the
// agent is away (a name watch only). A task whose app takes panels' requests gets Cancel and
// Pause/Resume buttons in its row. GNOME Shell 45 to 50, as ES modules; scripts/gnome-extension.py
// writes the copy for 43 and 44 from this file (make builds both, make install puts the one that
// fits the installed shell, make extension-zip packs them for users).
import Clutter from 'gi://Clutter';
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import GObject from 'gi://GObject';
import St from 'gi://St';

import * as Main from 'resource:///org/gnome/shell/ui/main.js';
import * as PanelMenu from 'resource:///org/gnome/shell/ui/panelMenu.js';
import * as PopupMenu from 'resource:///org/gnome/shell/ui/popupMenu.js';
import {Extension} from 'resource:///org/gnome/shell/extensions/extension.js';

import * as Model from './model.js';

const PROPS_IFACE = 'org.freedesktop.DBus.Properties';
const MANAGER_IFACE = 'org.freedesktop.DBus.ObjectManager';
// The menu is rebuilt at most this often while open (task progress arrives up to 10 times a second
// per task).
const MENU_REFRESH_MS = 250;
// A task row's progress bar, in logical pixels.
const BAR_WIDTH = 240;
const BAR_HEIGHT = 4;

/** A vertical St.BoxLayout: `orientation` where the shell has it (47 and later; `vertical` is
 * deprecated from 48 and gone in 51), `vertical` before. */
function verticalBox(params) {
    const hasOrientation = GObject.Object.find_property.call(St.BoxLayout, 'orientation') !== null;
    return new St.BoxLayout(hasOrientation
        ? {...params, orientation: Clutter.Orientation.VERTICAL} : {...params, vertical: true});
}

/** A task row's buttons for its owner's offers: Pause or Resume, then Cancel. `ask(method, args)`
 * sends the request; `_` translates the accessible names. */
function actionButtons(actions, ask, _) {
    const buttons = [];
    const button = (icon, name, method, args) => {
        const b = new St.Button({
            style_class: 'icon-button', can_focus: true, accessible_name: name, y_align: Clutter.ActorAlign.CENTER,
            child: new St.Icon({icon_name: icon, style_class: 'popup-menu-icon'}),
        });
        b.netactivityAction = method === 'RequestCancel' ? 'cancel' : actions.pause;
        b.connect('clicked', () => ask(actions.path, method, args));
        buttons.push(b);
    };
    if (actions.pause === 'pause')
        button('media-playback-pause-symbolic', _('Pause'), 'RequestSuspend', new GLib.Variant('(b)', [true]));
    else if (actions.pause === 'resume')
        button('media-playback-start-symbolic', _('Resume'), 'RequestSuspend', new GLib.Variant('(b)', [false]));
    if (actions.cancel)
        button('process-stop-symbolic', _('Cancel'), 'RequestCancel', null);
    return buttons;
}

/** A menu row: its text, under it a progress bar when the row has a fraction (0 to 1), and beside
 * it the buttons of a task that takes panels' requests. */
function menuRow(row, ask, _) {
    const buttons = row.actions ? actionButtons(row.actions, ask, _) : [];
    if (!(row.fraction >= 0) && buttons.length === 0)
        return [new PopupMenu.PopupMenuItem(row.text, {reactive: false}), null, []];
    const item = new PopupMenu.PopupBaseMenuItem({reactive: false});
    const box = verticalBox({x_expand: true, y_align: Clutter.ActorAlign.CENTER});
    // As a PopupMenuItem has it: the label is the item's text, for screen readers too.
    item.label = new St.Label({text: row.text});
    item.label_actor = item.label;
    box.add_child(item.label);
    const bar = new St.Widget({
        style: `width: ${BAR_WIDTH}px; height: ${BAR_HEIGHT}px; margin-top: 6px; border-radius: 2px; ` +
            'background-color: rgba(128, 128, 128, 0.4);',
    });
    const filled = Math.round(BAR_WIDTH * Math.min(1, Math.max(0, row.fraction)));
    bar.add_child(new St.Widget({
        style: `width: ${filled}px; height: ${BAR_HEIGHT}px; border-radius: 2px; background-color: #3584e4;`,
    }));
    if (row.fraction >= 0)
        box.add_child(bar);
    item.add_child(box);
    for (const b of buttons)
        item.add_child(b);
    return [item, row.fraction >= 0 ? {fraction: row.fraction, filled, width: BAR_WIDTH} : null, buttons];
}

const Indicator = GObject.registerClass(
class NetActivityIndicator extends PanelMenu.Button {
    /** `extension`: the extension (its folder, for the icon's fallback copy, and its gettext). */
    _init(extension) {
        const _ = text => extension.gettext(text);
        super._init(0.0, _('Network activity'));
        this._gettext = _;
        // The project's symbolic icon from the icon theme (make install puts it in hicolor), else
        // the extension's own copy; the count lives in the menu, so the icon never changes width.
        this.add_child(new St.Icon({
            gicon: new Gio.ThemedIcon({name: 'netactivity-symbolic'}),
            fallback_gicon: Gio.icon_new_for_string(
                extension.dir.get_child('icons').get_child('netactivity-symbolic.svg').get_path()),
            style_class: 'system-status-icon',
        }));
        this.visible = false;

        this._state = Model.emptyState();
        this._generation = 0;
        this._connection = null;
        this._owner = null;
        this._buttons = [];
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
        this._connection = connection;
        this._owner = owner;
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
        this._connection = null;
        this._owner = null;
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

    /** A panel's request to a task's owner (RequestCancel, RequestSuspend), sent to the agent
     * the indicator follows; the task changes when its app acts, and the menu follows. */
    _ask(path, method, args) {
        if (!this._connection || !path.startsWith(Model.TASK_PREFIX))
            return;
        this._connection.call(this._owner, path, Model.TASK_IFACE, method, args, null,
            Gio.DBusCallFlags.NONE, 5000, this._cancellable, (c, result) => {
                try {
                    c.call_finish(result);
                } catch (e) {
                    if (!e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.CANCELLED))
                        log(`netactivity: ${method}: ${e.message}`);
                }
            });
    }

    _rebuildMenu() {
        this.menu.removeAll();
        this._bars = [];
        this._buttons = [];
        Model.view(this._state).sections.forEach((section, index) => {
            if (section.title || index > 0)
                this.menu.addMenuItem(new PopupMenu.PopupSeparatorMenuItem(section.title));
            for (const row of section.rows) {
                const [item, bar, buttons] = menuRow(row, (...a) => this._ask(...a), this._gettext);
                this.menu.addMenuItem(item);
                if (bar)
                    this._bars.push(bar);
                for (const b of buttons)
                    this._buttons.push({path: row.actions.path, action: b.netactivityAction, button: b});
            }
        });
    }

    /** Clicks a task row's button as a person would (for tests): `action` is 'cancel', 'pause' or
     * 'resume'. Answers whether the menu has that button. */
    click(path, action) {
        const found = this._buttons.find(b => b.path === path && b.action === action);
        found?.button.emit('clicked', 1);
        return !!found;
    }

    /** What the indicator shows, for tests and the curious (Looking Glass). */
    describe() {
        return {
            visible: this.visible,
            online: this._state.online,
            menu: Model.view(this._state).sections,
            // The progress bars and buttons the menu drew when it was last built.
            bars: this._bars,
            buttons: this._buttons.map(b => ({path: b.path, action: b.action, name: b.button.accessible_name})),
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

export default class NetActivityExtension extends Extension {
    enable() {
        // The menu's text in the agent's gettext domain (metadata.json's gettext-domain).
        Model.setGettext(text => this.gettext(text));
        this._indicator = new Indicator(this);
        Main.panel.addToStatusArea(this.uuid, this._indicator);
    }

    disable() {
        this._indicator.destroy();
        this._indicator = null;
    }
}
