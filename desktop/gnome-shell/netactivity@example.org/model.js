// SPDX-License-Identifier: GPL-2.0-or-later
// What the top-bar indicator shows, as plain functions of the agent's published state.
// No GNOME imports: tests run it under bare gjs (Tests/Integration/gnome/model_test.js). An ES module
// (GNOME Shell 45 and later); scripts/gnome-extension.py writes the copy for 43 and 44 from it.

// The text people read goes through gettext (domain "netactivity", the agent's): the extension
// hands its translator in; bare gjs (the tests) keeps English unless given one.
let _ = text => text;

/** `gettext`: the function that translates a message. */
export function setGettext(gettext) {
    _ = gettext;
}

export const AGENT_NAME = 'org.example.NetActivity';
export const AGENT_PATH = '/org/example/NetActivity';
export const AGENT_IFACE = 'org.example.NetActivity';
export const TASK_IFACE = 'org.example.NetActivity.Task';
export const TASK_PREFIX = '/org/example/NetActivity/tasks/';

// Rows per menu section; the rest is summed up in one "and N more" row.
export const MAX_ROWS = 8;
// Task objects followed at once (the agent caps live tasks too; this bounds the shell's memory
// whatever the agent publishes).
export const MAX_TASKS = 1024;
// Characters of an app or task name shown in a row.
export const MAX_TEXT = 48;
// Reasons kept per app (the agent sends at most 8).
export const MAX_REASONS = 8;

/** The state before the agent is seen (and after it leaves): nothing shown. */
export function emptyState() {
    return {online: false, visible: false, count: 0, clients: [], reasons: new Map(), tasks: new Map()};
}

function isCount(v) {
    return typeof v === 'number' && Number.isFinite(v) && v >= 0;
}

/** Folds properties of org.example.NetActivity (from GetAll or PropertiesChanged, unpacked) in.
 * Values of an unexpected type are ignored, never trusted. */
export function applyAgent(state, props) {
    if (typeof props.Visible === 'boolean')
        state.visible = props.Visible;
    if (isCount(props.ActivityCount))
        state.count = props.ActivityCount;
    if (Array.isArray(props.Clients)) {
        state.clients = props.Clients
            .filter(c => Array.isArray(c) && c.length === 3 && typeof c[0] === 'string' &&
                typeof c[1] === 'string' && isCount(c[2]))
            .map(([bus, name, count]) => ({bus, name, count}));
    }
    // Reasons: {bus name: [reason, ...]}, read by Get (its change comes as invalidated).
    if (props.Reasons && typeof props.Reasons === 'object' && !Array.isArray(props.Reasons)) {
        state.reasons = new Map();
        for (const [bus, list] of Object.entries(props.Reasons)) {
            if (Array.isArray(list))
                state.reasons.set(bus, list.filter(r => typeof r === 'string' && r !== '').slice(0, MAX_REASONS));
        }
    }
}

const TASK_STRINGS = ['State', 'Description', 'Owner', 'Error'];
const TASK_FLAGS = ['Cancellable', 'Suspendable'];
const TASK_COUNTS = ['CountOfBytesSent', 'CountOfBytesExpectedToSend', 'CountOfBytesReceived',
    'CountOfBytesExpectedToReceive', 'FractionCompleted'];

/** Folds properties of one task object in (InterfacesAdded, GetManagedObjects, PropertiesChanged).
 * Paths outside the agent's task folder are ignored. */
export function applyTask(state, path, props) {
    if (typeof path !== 'string' || !path.startsWith(TASK_PREFIX))
        return;
    let task = state.tasks.get(path);
    if (!task) {
        if (state.tasks.size >= MAX_TASKS)
            return;
        task = {State: 'running', Description: '', Owner: '', Error: '', CountOfBytesSent: 0,
            CountOfBytesExpectedToSend: 0, CountOfBytesReceived: 0, CountOfBytesExpectedToReceive: 0,
            FractionCompleted: 0, Cancellable: false, Suspendable: false};
        state.tasks.set(path, task);
    }
    for (const key of TASK_STRINGS) {
        if (typeof props[key] === 'string')
            task[key] = props[key];
    }
    for (const key of TASK_COUNTS) {
        if (isCount(props[key]))
            task[key] = props[key];
    }
    for (const key of TASK_FLAGS) {
        if (typeof props[key] === 'boolean')
            task[key] = props[key];
    }
}

export function removeTask(state, path) {
    state.tasks.delete(path);
}

/** One line, at most MAX_TEXT characters (whole code points), control characters as spaces. */
export function shorten(text) {
    // eslint-disable-next-line no-control-regex
    const chars = Array.from(String(text).replace(/[\u0000-\u001f\u007f]+/g, ' ').trim());
    return chars.length > MAX_TEXT ? `${chars.slice(0, MAX_TEXT - 1).join('')}…` : chars.join('');
}

/** Bytes as people read them: 512 B, 1.5 kB, 12 MB (SI units, as GNOME's file sizes). */
export function formatBytes(n) {
    if (n < 1000)
        return `${n} B`;
    const units = ['kB', 'MB', 'GB', 'TB', 'PB'];
    let value = n, unit = -1;
    while (value >= 1000 && unit < units.length - 1) {
        value /= 1000;
        unit++;
    }
    return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

function taskProgress(t) {
    const [done, total] = t.CountOfBytesExpectedToReceive > 0 || t.CountOfBytesReceived > 0
        ? [t.CountOfBytesReceived, t.CountOfBytesExpectedToReceive]
        : [t.CountOfBytesSent, t.CountOfBytesExpectedToSend];
    if (total > 0) {
        const percent = Math.min(100, Math.floor(100 * done / total));
        return {fraction: Math.min(1, done / total), text: `${percent} % of ${formatBytes(total)}`};
    }
    // No size in either direction: a task measured in a fraction only (SetFraction) shows it alone.
    const fraction = t.FractionCompleted;
    if (done === 0 && t.CountOfBytesExpectedToSend === 0 && t.CountOfBytesExpectedToReceive === 0 && fraction > 0)
        return {fraction: Math.min(1, fraction), text: `${Math.min(100, Math.floor(100 * fraction))} %`};
    return {fraction: -1, text: done > 0 ? formatBytes(done) : ''};
}

function capped(rows, more) {
    if (rows.length <= MAX_ROWS)
        return rows;
    const shown = rows.slice(0, MAX_ROWS - 1);
    shown.push({text: more(rows.length - shown.length), fraction: -1});
    return shown;
}

/** What to draw: shown (the indicator is in the top bar) and the menu's rows: {title, rows:
 * [{text, fraction, actions}]} sections (an empty title draws a plain separator). fraction is -1 when
 * unknown; actions, on a task whose owner takes panels' requests only: {path, cancel (bool), pause
 * ('pause', 'resume' or null)}. No count is drawn beside the icon: the menu says who holds how much. */
export function view(state) {
    const shown = state.online && state.visible;
    const sections = [];
    const apps = state.clients.map(c => {
        // An app whose name the agent does not know yet is "An app", never its bus name.
        const name = `${shorten(c.name || _('An app'))}${c.count > 1 ? ` (${c.count})` : ''}`;
        // Why it is busy, when its leases said so: "Mail — Fetching new mail".
        const reasons = state.reasons.get(c.bus) ?? [];
        return {text: reasons.length > 0 ? `${name} — ${shorten(reasons.join(', '))}` : name, fraction: -1};
    });
    const more = n => _('and {1} more').replace('{1}', String(n));
    sections.push({title: _('Using the network'), rows: capped(apps, more)});
    const tasks = [];
    for (const [path, t] of state.tasks) {
        if (t.State !== 'running' && t.State !== 'suspended')
            continue;
        const p = taskProgress(t);
        const parts = [shorten(t.Description || 'Task')];
        if (p.text)
            parts.push(p.text);
        if (t.State === 'suspended')
            parts.push(_('paused'));
        const row = {text: parts.join(' — '), fraction: p.fraction};
        // What the task's owner takes from a panel: the row's buttons (Cancel, Pause or Resume).
        if (t.Cancellable || t.Suspendable) {
            row.actions = {path, cancel: t.Cancellable,
                pause: t.Suspendable ? (t.State === 'suspended' ? 'resume' : 'pause') : null};
        }
        tasks.push(row);
    }
    if (tasks.length > 0)
        sections.push({title: _('Tasks'), rows: capped(tasks, more)});
    // A status line is a row, not a title: the shell opens no menu that holds titles only.
    if (!state.online)
        return {shown, sections: [{title: '', rows: [{text: _('Network activity agent not running'), fraction: -1}]}]};
    if (apps.length === 0 && tasks.length === 0)
        return {shown, sections: [{title: '', rows: [{text: _('No app is using the network'), fraction: -1}]}]};
    return {shown, sections};
}
