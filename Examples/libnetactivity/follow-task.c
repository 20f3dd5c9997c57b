// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// follow-task: a task's progress as a panel or a progress bar follows it, with libnetactivity-1.
//
//   cc follow-task.c $(pkg-config --cflags --libs netactivity-1) -o follow-task
//   ./follow-task /org/example/NetActivity/tasks/7     (a path from `netactivity tasks`)
//
// Prints "TASK DESCRIPTION", then "progress PERCENT" as it changes, and "completed ERROR" (empty
// for success) when it ends. The generated proxy follows the task's PropertiesChanged signals.
#include <netactivity.h>

static GMainLoop *loop;

static void changed(NetActivityTask *task, GParamSpec *spec, gpointer data) {
    (void)spec, (void)data;
    if (g_strcmp0(net_activity_task_get_state(task), "completed") == 0) {
        g_print("completed %s\n", net_activity_task_get_error(task));
        g_main_loop_quit(loop);
        return;
    }
    g_print("progress %.0f\n", net_activity_task_get_fraction_completed(task) * 100);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        g_printerr("usage: follow-task TASK-PATH\n");
        return 64;
    }
    GError *error = NULL;
    g_autoptr(NetActivityTask) task = net_activity_task_proxy_new_for_bus_sync(
        G_BUS_TYPE_SESSION, G_DBUS_PROXY_FLAGS_NONE, NET_ACTIVITY_BUS_NAME, argv[1], NULL, &error);
    if (!task || !net_activity_task_get_description(task)) {
        g_print("error %s\n", error ? error->message : "no such task");
        return 1;
    }
    loop = g_main_loop_new(NULL, FALSE);
    g_print("task %s\n", net_activity_task_get_description(task));
    g_signal_connect(task, "notify::fraction-completed", G_CALLBACK(changed), NULL);
    g_signal_connect(task, "notify::state", G_CALLBACK(changed), NULL);
    g_main_loop_run(loop);
    g_main_loop_unref(loop);
    return 0;
}
