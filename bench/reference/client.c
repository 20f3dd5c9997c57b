// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/* The bench's D-Bus client (libdbus), for the agent and the C reference services alike.
 *
 *   client rtt [options]        N calls one after another: rate and latency percentiles
 *   client pipelined [options]  N calls with up to W in flight: rate
 *   client wait [options]       until the destination has an owner (exit 1 after -T ms)
 *   client released [options]   until it has none
 *
 *   -i IFACE -m METHOD  the call (default org.example.NetActivity.IncrementActivityCount on
 *                       org.example.NetActivity at /org/example/NetActivity)
 *   --ping-bus          org.freedesktop.DBus.Peer.Ping on the bus daemon itself (one hop)
 *   -n N                calls per client (default 10000)
 *   -w W                calls in flight, pipelined (default 1000)
 *   -c C                C client processes at once, each with its own connection (rtt)
 *   -T MS               call timeout, or how long wait waits (default 25000)
 *
 * The bus: DBUS_SESSION_BUS_ADDRESS. Output: one line of key=value pairs (calls, errors,
 * first_error, secs, calls_per_s, and for rtt p50_us, p99_us). */
#define _GNU_SOURCE
#include <dbus/dbus.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *destination = "org.example.NetActivity", *path = "/org/example/NetActivity",
                  *interface = "org.example.NetActivity", *method = "IncrementActivityCount";
static long calls = 10000;
static int window = 1000, clients = 1, timeout_ms = 25000;

struct result {
    long calls, errors;
    double secs, p50_us, p99_us;
    char first_error[128];
};

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static DBusConnection *connect_bus(void)
{
    DBusError error = DBUS_ERROR_INIT;
    DBusConnection *bus = dbus_bus_get_private(DBUS_BUS_SESSION, &error);
    if (bus == NULL) {
        fprintf(stderr, "client: %s\n", error.message);
        exit(2);
    }
    dbus_connection_set_exit_on_disconnect(bus, FALSE);
    return bus;
}

static DBusMessage *new_call(void)
{
    DBusMessage *m = dbus_message_new_method_call(destination, path, interface, method);
    if (m == NULL) {
        fprintf(stderr, "client: out of memory\n");
        exit(2);
    }
    return m;
}

static void count_error(struct result *r, const char *name)
{
    if (r->errors++ == 0)
        snprintf(r->first_error, sizeof r->first_error, "%s", name);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void round_trips(DBusConnection *bus, struct result *r)
{
    double *latency = calloc((size_t)calls, sizeof *latency);
    DBusMessage *call = new_call();
    double start = seconds();
    for (long i = 0; i < calls; i++) {
        DBusError error = DBUS_ERROR_INIT;
        double t = seconds();
        DBusMessage *reply = dbus_connection_send_with_reply_and_block(bus, call, timeout_ms, &error);
        latency[i] = (seconds() - t) * 1e6;
        if (reply == NULL) {
            count_error(r, error.name);
            dbus_error_free(&error);
        } else {
            dbus_message_unref(reply);
        }
    }
    r->secs = seconds() - start;
    r->calls = calls;
    qsort(latency, (size_t)calls, sizeof *latency, by_value);
    r->p50_us = latency[calls / 2];
    r->p99_us = latency[calls * 99 / 100];
    dbus_message_unref(call);
    free(latency);
}

static void pipelined(DBusConnection *bus, struct result *r)
{
    long sent = 0, answered = 0;
    double start = seconds();
    while (answered < calls) {
        while (sent < calls && sent - answered < window) {
            DBusMessage *call = new_call();
            dbus_connection_send(bus, call, NULL);
            dbus_message_unref(call);
            sent++;
        }
        if (!dbus_connection_read_write(bus, timeout_ms)) {
            count_error(r, "Disconnected");
            break;
        }
        DBusMessage *m;
        while ((m = dbus_connection_pop_message(bus)) != NULL) {
            int type = dbus_message_get_type(m);
            if (type == DBUS_MESSAGE_TYPE_METHOD_RETURN || type == DBUS_MESSAGE_TYPE_ERROR) {
                answered++;
                if (type == DBUS_MESSAGE_TYPE_ERROR)
                    count_error(r, dbus_message_get_error_name(m));
            }
            dbus_message_unref(m);
        }
    }
    r->secs = seconds() - start;
    r->calls = answered;
}

/* rtt with -c: every process connects, then all start together; the rate is all calls over the
 * time from the start to the last one's end. */
static void concurrent(struct result *total)
{
    struct result *shared = mmap(NULL, sizeof *shared * (size_t)clients, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int ready[2], go[2];
    if (shared == MAP_FAILED || pipe(ready) != 0 || pipe(go) != 0) {
        perror("client");
        exit(2);
    }
    for (int c = 0; c < clients; c++) {
        if (fork() == 0) {
            DBusConnection *bus = connect_bus();
            char byte = 0;
            close(ready[0]);
            close(go[1]);
            if (write(ready[1], &byte, 1) != 1 || read(go[0], &byte, 1) != 0)
                _exit(2);
            memset(&shared[c], 0, sizeof shared[c]);
            round_trips(bus, &shared[c]);
            _exit(0);
        }
    }
    close(ready[1]);
    close(go[0]);
    char byte;
    for (int c = 0; c < clients; c++)
        if (read(ready[0], &byte, 1) != 1)
            exit(2);
    double start = seconds();
    close(go[1]); /* every child's read returns 0: go */
    while (wait(NULL) > 0) {
    }
    total->secs = seconds() - start;
    for (int c = 0; c < clients; c++) {
        total->calls += shared[c].calls;
        if (shared[c].errors && total->errors == 0)
            snprintf(total->first_error, sizeof total->first_error, "%s", shared[c].first_error);
        total->errors += shared[c].errors;
        total->p50_us += shared[c].p50_us / clients;
        total->p99_us = shared[c].p99_us > total->p99_us ? shared[c].p99_us : total->p99_us;
    }
}

static int wait_for_owner(dbus_bool_t owned)
{
    DBusConnection *bus = connect_bus();
    double deadline = seconds() + timeout_ms / 1e3;
    do {
        DBusError error = DBUS_ERROR_INIT;
        if (dbus_bus_name_has_owner(bus, destination, &error) == owned && !dbus_error_is_set(&error))
            return 0;
        dbus_error_free(&error);
        usleep(20000);
    } while (seconds() < deadline);
    return 1;
}

int main(int argc, char **argv)
{
    static const struct option long_options[] = {{"ping-bus", no_argument, NULL, 'B'}, {0}};
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: client rtt|pipelined|wait|released [-i IFACE] [-m METHOD] [--ping-bus] [-n N] [-w W] [-c C] [-T MS]\n");
        return 2;
    }
    const char *mode = argv[1];
    int option;
    optind = 2;
    while ((option = getopt_long(argc, argv, "i:m:n:w:c:T:", long_options, NULL)) != -1) {
        switch (option) {
        case 'i': interface = optarg; break;
        case 'm': method = optarg; break;
        case 'n': calls = atol(optarg); break;
        case 'w': window = atoi(optarg); break;
        case 'c': clients = atoi(optarg); break;
        case 'T': timeout_ms = atoi(optarg); break;
        case 'B':
            destination = DBUS_SERVICE_DBUS, path = DBUS_PATH_DBUS;
            interface = DBUS_INTERFACE_PEER, method = "Ping";
            break;
        default: return 2;
        }
    }
    if (calls < 1 || window < 1 || clients < 1)
        return 2;
    if (strcmp(mode, "wait") == 0 || strcmp(mode, "released") == 0)
        return wait_for_owner(strcmp(mode, "wait") == 0);
    struct result r = {0};
    if (strcmp(mode, "rtt") == 0 && clients > 1)
        concurrent(&r);
    else if (strcmp(mode, "rtt") == 0)
        round_trips(connect_bus(), &r);
    else if (strcmp(mode, "pipelined") == 0)
        pipelined(connect_bus(), &r);
    else
        return 2;
    printf("calls=%ld errors=%ld first_error=%s secs=%.6f calls_per_s=%.0f", r.calls, r.errors,
           r.errors ? r.first_error : "-", r.secs, r.calls / r.secs);
    if (strcmp(mode, "rtt") == 0)
        printf(" p50_us=%.1f p99_us=%.1f", r.p50_us, r.p99_us);
    printf("\n");
    return r.errors ? 1 : 0;
}
