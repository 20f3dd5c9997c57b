// SPDX-License-Identifier: GPL-2.0-or-later
// The GNOME Shell extension's logic under bare gjs, as an ES module (GNOME Shell 45 and later) or
// as the legacy script written for 43 and 44:
//   gjs -m model_test.js EXTENSION_DIR [legacy]
// Prints "ok N" with the number of checks, and exits 1 at the first failure.
import GLib from 'gi://GLib';
import System from 'system';

const [dir, form] = System.programArgs;
let M;
if (form === 'legacy') {
    imports.searchPath.unshift(dir);
    M = imports.model;
} else {
    M = await import(GLib.filename_to_uri(GLib.canonicalize_filename(`${dir}/model.js`, null), null));
}

let checks = 0;
function eq(actual, expected, what) {
    const a = JSON.stringify(actual), e = JSON.stringify(expected);
    if (a !== e) {
        printerr(`FAIL ${what}: got ${a}, expected ${e}`);
        System.exit(1);
    }
    checks++;
}

// Nothing shows before the agent answers, nor when it is online but not Visible.
let s = M.emptyState();
eq(M.view(s).shown, false, 'offline hidden');
eq(M.view(s).sections, [{title: '', rows: [{text: 'Network activity agent not running', fraction: -1}]}], 'offline menu');
s.online = true;
M.applyAgent(s, {Visible: false, ActivityCount: 0, Clients: []});
eq(M.view(s), {shown: false, sections: [{title: '', rows: [{text: 'No app is using the network', fraction: -1}]}]}, 'idle');

// Visible with clients: one row per app, its count shown only when above 1 (no count by the icon).
M.applyAgent(s, {Visible: true, ActivityCount: 3, Clients: [[':1.5', 'firefox', 2], [':1.9', '', 1]]});
let v = M.view(s);
eq([v.shown, 'label' in v], [true, false], 'active');
eq(v.sections[0].rows.map(r => r.text), ['firefox (2)', 'An app'], 'client rows (no bus name for an unnamed one)');

// Reasons (read by Get after an invalidation) join the app's row; an app without any keeps its
// plain row; junk entries and empty reasons are dropped; a long list is cut.
M.applyAgent(s, {Reasons: {':1.5': ['Syncing bookmarks', '', 'Backup\nnow'], ':1.7': 'junk'}});
eq(M.view(s).sections[0].rows.map(r => r.text), ['firefox (2) — Syncing bookmarks, Backup now', 'An app'],
    'reasons shown with their app');
M.applyAgent(s, {Reasons: {':1.5': ['x'.repeat(100)]}});
eq(Array.from(M.view(s).sections[0].rows[0].text).length, 'firefox (2) — '.length + M.MAX_TEXT, 'long reason cut');
M.applyAgent(s, {Reasons: [1, 2]});
eq(s.reasons.get(':1.5')?.length, 1, 'reasons of the wrong type ignored');
M.applyAgent(s, {Reasons: {}});
eq(M.view(s).sections[0].rows.map(r => r.text), ['firefox (2)', 'An app'], 'reasons gone');

// Values of the wrong type are ignored, not trusted.
M.applyAgent(s, {Visible: 'yes', ActivityCount: -4, Clients: [['x', 7, 1], 'junk', [':1.2', 'ok', 1]]});
v = M.view(s);
eq(v.shown, true, 'wrong types ignored');
eq(v.sections[0].rows.map(r => r.text), ['ok'], 'bad client entries dropped');

// Tasks: progress from received (else sent) bytes; unknown totals show bytes; suspended says so;
// completed tasks leave the menu; paths outside the task folder are ignored.
M.applyTask(s, '/org/example/NetActivity/tasks/1', {State: 'running', Description: 'backup',
    CountOfBytesReceived: 250, CountOfBytesExpectedToReceive: 1000});
M.applyTask(s, '/org/example/NetActivity/tasks/2', {Description: 'upload\nphotos',
    CountOfBytesSent: 1500000});
M.applyTask(s, '/org/example/NetActivity/tasks/3', {State: 'suspended', Description: 'sync',
    CountOfBytesSent: 5, CountOfBytesExpectedToSend: 10});
M.applyTask(s, '/org/example/NetActivity/tasks/4', {State: 'completed', Description: 'gone'});
M.applyTask(s, '/org/example/NetActivity/tasks/6', {State: 'running', Description: 'render', FractionCompleted: 0.6});
M.applyTask(s, '/elsewhere/tasks/5', {State: 'running', Description: 'fake'});
v = M.view(s);
eq(v.sections[1].title, 'Tasks', 'task section');
eq(v.sections[1].rows, [
    {text: 'backup — 25 % of 1.0 kB', fraction: 0.25},
    {text: 'upload photos — 1.5 MB', fraction: -1},
    {text: 'sync — 50 % of 10 B — paused', fraction: 0.5},
    {text: 'render — 60 %', fraction: 0.6},
], 'task rows (a fraction-only task: a percentage, no sizes)');

// A task whose owner takes panels' requests carries its buttons: Cancel, and Pause or Resume as it stands.
M.applyTask(s, '/org/example/NetActivity/tasks/7', {State: 'running', Description: 'copy', Cancellable: true,
    Suspendable: true});
M.applyTask(s, '/org/example/NetActivity/tasks/8', {State: 'suspended', Description: 'sync2', Cancellable: 'yes',
    Suspendable: true});
eq(M.view(s).sections[1].rows.slice(4), [
    {text: 'copy', fraction: -1, actions: {path: '/org/example/NetActivity/tasks/7', cancel: true, pause: 'pause'}},
    {text: 'sync2 — paused', fraction: -1, actions: {path: '/org/example/NetActivity/tasks/8', cancel: false, pause: 'resume'}},
], 'task rows with buttons (a flag of the wrong type ignored)');
M.removeTask(s, '/org/example/NetActivity/tasks/7');
M.removeTask(s, '/org/example/NetActivity/tasks/8');
M.removeTask(s, '/org/example/NetActivity/tasks/1');
eq(M.view(s).sections[1].rows.length, 3, 'removed task leaves');

// Long lists end in one "and N more" row; long names are cut at a code point.
s = M.emptyState();
s.online = true;
const many = [];
for (let i = 0; i < 20; i++)
    many.push([`:1.${i}`, `app${i}`, 1]);
M.applyAgent(s, {Visible: true, ActivityCount: 20, Clients: many});
v = M.view(s);
eq(v.sections[0].rows.length, M.MAX_ROWS, 'rows capped');
eq(v.sections[0].rows[M.MAX_ROWS - 1].text, `and ${20 - M.MAX_ROWS + 1} more`, 'and N more');
const long = M.shorten('😀'.repeat(100));
eq([Array.from(long).length, long.endsWith('…')], [48, true], 'shorten');
eq([M.formatBytes(999), M.formatBytes(1000), M.formatBytes(12345678)], ['999 B', '1.0 kB', '12 MB'], 'bytes');

// The number of followed tasks is bounded.
for (let i = 0; i < M.MAX_TASKS + 10; i++)
    M.applyTask(s, `/org/example/NetActivity/tasks/${i}`, {State: 'running'});
eq(s.tasks.size, M.MAX_TASKS, 'task cap');

// Text people read goes through the translator the extension hands in.
M.setGettext(t => ({'Tasks': 'Aufgaben', 'and {1} more': 'und {1} weitere', 'Using the network': 'Nutzen das Netzwerk'})[t] ?? t);
v = M.view(s);
eq([v.sections[0].title, v.sections[0].rows[M.MAX_ROWS - 1].text], ['Nutzen das Netzwerk', `und ${20 - M.MAX_ROWS + 1} weitere`], 'translated');
M.setGettext(t => t);

print(`ok ${checks}`);
