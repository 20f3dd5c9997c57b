// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// cancellable-task: a task that panels can cancel and pause, with libnetactivity-1.
//
//   cc cancellable-task.c $(pkg-config --cflags --libs netactivity-1) -o cancellable-task
//   ./cancellable-task
//
// Begins the task "backup" with BeginTask's "cancellable" and "suspendable" options and prints
// "task PATH". A panel's Pause or Resume (GNOME Shell's menu, Plasma's job tracker, the tray, or
// `netactivity tasks pause N`) arrives as the task proxy's "suspend-requested" signal, its Cancel as
// "cancel-requested"; nothing changes by itself: the app pauses, resumes or stops its work and
// says so (Suspend, Resume, Complete). Prints "suspend requested 1", "suspend requested 0" and
// "cancel requested" as they come, and exits 0 once it has completed the task as cancelled.
#include <netactivity.h>

static GMainLoop *loop;

static void suspend_requested(NetActivityTask *task, gboolean suspended, gpointer data) {
    (void)data;
    g_print("suspend requested %d\n", suspended);
    // The work would pause or go on here; then the task says so.
    if (suspended)
        net_activity_task_call_suspend(task, NULL, NULL, NULL);
    else
        net_activity_task_call_resume(task, NULL, NULL, NULL);
}

static void cancel_requested(NetActivityTask *task, gpointer data) {
    (void)data;
    g_print("cancel requested\n");
    g_autoptr(GError) error = NULL;
    if (!net_activity_task_call_complete_sync(task, "org.example.NetActivity.Error.Cancelled", NULL, &error))
        g_printerr("%s\n", error->message);
    g_main_loop_quit(loop);
}

int main(void) {
    g_autoptr(GError) error = NULL;
    g_autoptr(NetActivityAgent) agent = net_activity_agent_get_sync(NULL, &error);
    g_autofree gchar *path = NULL;
    GVariant *options = g_variant_new_parsed("{'cancellable': <true>, 'suspendable': <true>}");
    if (!agent || !net_activity_agent_call_begin_task_sync(agent, "backup", options, &path, NULL, &error)) {
        g_printerr("error %s\n", error->message);
        return 1;
    }
    // The task's proxy on the agent's connection: the requests are sent to it alone.
    g_autoptr(NetActivityTask) task = net_activity_task_proxy_new_sync(
        g_dbus_proxy_get_connection(G_DBUS_PROXY(agent)), G_DBUS_PROXY_FLAGS_NONE, NET_ACTIVITY_BUS_NAME, path, NULL,
        &error);
    if (!task) {
        g_printerr("error %s\n", error->message);
        return 1;
    }
    g_signal_connect(task, "suspend-requested", G_CALLBACK(suspend_requested), NULL);
    g_signal_connect(task, "cancel-requested", G_CALLBACK(cancel_requested), NULL);
    g_print("task %s\n", path);
    loop = g_main_loop_new(NULL, FALSE);
    g_main_loop_run(loop);
    g_main_loop_unref(loop);
    return 0;
}
