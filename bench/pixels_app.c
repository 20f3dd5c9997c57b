// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// The bench's app for decoded pixels: what a desktop app showing images does with the agent.
// Each image is one Downloader.FetchPixels (sd-bus); the reply's memfd is mapped read-only and
// every page of it read, as a compositor reading a texture would; nothing is decoded here.
//
//   pixels_app show INFLIGHT BOX URL...   fetch every URL (INFLIGHT calls at once, BOX: max-width and
//                                         max-height, 0 for none), keep them mapped, print "ready ...",
//                                         then hold them until standard input ends
//   pixels_app hits N URL                 N FetchPixels of a URL the agent holds decoded, one at a
//                                         time, each mapped and read: "p50_us=... p99_us=..."
//   pixels_app decode N BOX FILE          N images added (AddImageFromFd, N identifiers, the same
//                                         bytes), then N OpenPixels one at a time, each mapped (its
//                                         rows are read when drawn, as a decoder's own output would
//                                         be): "images_per_s=... cpu_ms=..." (this process's CPU)
//   pixels_app animation N BOX FILE       as decode, each OpenPixels asking for every frame
//                                         ("animation"): "images_per_s=... mapped_bytes=..."
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "clocks.h"

#define NAME "org.example.NetActivity"
#define PATH "/org/example/NetActivity"

static sd_bus *bus;
static uint32_t box;
static int whole_animation;
static int pending, failures;
static uint64_t mapped_bytes, page_sum;

static void die(const char *what, int r) {
    fprintf(stderr, "pixels_app: %s: %s\n", what, strerror(-r));
    exit(1);
}

// Maps the reply's pixels (kept mapped when `keep`) and, when `touch`, reads one byte of every
// page; 0 or -errno.
static int take(sd_bus_message *reply, int keep, int touch) {
    int fd, r;
    uint32_t stride = 0, height = 0;
    size_t frames = 1;
    if ((r = sd_bus_message_read(reply, "h", &fd)) < 0) return r;
    if ((r = sd_bus_message_enter_container(reply, 'a', "{sv}")) < 0) return r;
    while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
        const char *key;
        sd_bus_message_read(reply, "s", &key);
        if (strcmp(key, "stride") == 0) sd_bus_message_read(reply, "v", "u", &stride);
        else if (strcmp(key, "height") == 0) sd_bus_message_read(reply, "v", "u", &height);
        else if (strcmp(key, "frame-durations") == 0) {  // an animation: as many frames
            const void *durations;
            size_t size = 0;
            sd_bus_message_enter_container(reply, 'v', "au");
            sd_bus_message_read_array(reply, 'u', &durations, &size);
            sd_bus_message_exit_container(reply);
            frames = size / 4 ? size / 4 : 1;
        }
        else sd_bus_message_skip(reply, "v");
        sd_bus_message_exit_container(reply);
    }
    size_t length = (size_t)stride * height * frames;
    const uint8_t *p = mmap(NULL, length, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return -1;
    for (size_t i = 0; touch && i < length; i += 4096) page_sum += p[i];
    mapped_bytes += length;
    if (!keep) munmap((void *)p, length);
    return 0;
}

static int append_box(sd_bus_message *m) {
    if (whole_animation) return sd_bus_message_append(m, "a{sv}", 3, "max-width", "u", box, "max-height", "u", box,
                                                      "animation", "b", 1);
    if (!box) return sd_bus_message_append(m, "a{sv}", 0);
    return sd_bus_message_append(m, "a{sv}", 2, "max-width", "u", box, "max-height", "u", box);
}

static int fetched(sd_bus_message *reply, void *data, sd_bus_error *error) {
    (void)data, (void)error;
    pending--;
    if (sd_bus_message_is_method_error(reply, NULL)) {
        fprintf(stderr, "pixels_app: %s\n", sd_bus_message_get_error(reply)->message);
        failures++;
    } else if (take(reply, 1, 1) < 0) {
        failures++;
    }
    return 0;
}

static void fetch(const char *url) {
    sd_bus_message *m;
    int r = sd_bus_message_new_method_call(bus, &m, NAME, PATH, NAME ".Downloader", "FetchPixels");
    if (r >= 0) r = sd_bus_message_append(m, "s", url);
    if (r >= 0) r = append_box(m);
    if (r >= 0) r = sd_bus_call_async(bus, NULL, m, fetched, NULL, UINT64_MAX);
    if (r < 0) die("FetchPixels", r);
    sd_bus_message_unref(m);
    pending++;
}

static void run_until(int left) {
    while (pending > left) {
        int r = sd_bus_process(bus, NULL);
        if (r < 0) die("process", r);
        if (r == 0 && (r = sd_bus_wait(bus, UINT64_MAX)) < 0) die("wait", r);
    }
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static sd_bus_message *call(const char *interface, const char *member, const char *id, int fd) {
    sd_bus_message *m, *reply = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    int r = sd_bus_message_new_method_call(bus, &m, NAME, PATH, interface, member);
    if (r >= 0 && id) r = sd_bus_message_append(m, "s", id);
    if (r >= 0 && fd >= 0) r = sd_bus_message_append(m, "h", fd);
    if (r >= 0 && strstr(member, "Pixels")) r = append_box(m);  // FetchPixels, OpenPixels: their options
    if (r >= 0) r = sd_bus_call(bus, m, UINT64_MAX, &error, &reply);
    if (r < 0) {
        fprintf(stderr, "pixels_app: %s: %s\n", member, error.message ? error.message : strerror(-r));
        exit(1);
    }
    sd_bus_message_unref(m);
    return reply;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: pixels_app show INFLIGHT BOX URL... | hits N URL | decode N BOX FILE | animation N BOX FILE\n");
        return 64;
    }
    int r = sd_bus_open_user(&bus);
    if (r < 0) die("session bus", r);
    if (strcmp(argv[1], "show") == 0) {
        int inflight = atoi(argv[2]);
        box = (uint32_t)atoi(argv[3]);
        for (int i = 4; i < argc; i++) {
            run_until(inflight - 1);
            fetch(argv[i]);
        }
        run_until(0);
        printf("ready images=%d failures=%d mapped_bytes=%llu sum=%llu\n", argc - 4, failures,
               (unsigned long long)mapped_bytes, (unsigned long long)page_sum);
        fflush(stdout);
        char c;
        while (read(0, &c, 1) > 0) {}
        return failures ? 1 : 0;
    }
    if (strcmp(argv[1], "hits") == 0) {
        int n = atoi(argv[2]);
        double *t = calloc((size_t)n, sizeof *t);
        sd_bus_message_unref(call(NAME ".Downloader", "FetchPixels", argv[3], -1));  // now it is held
        for (int i = 0; i < n; i++) {
            double t0 = now();
            sd_bus_message *reply = call(NAME ".Downloader", "FetchPixels", argv[3], -1);
            if (take(reply, 0, 1) < 0) die("map", -1);
            sd_bus_message_unref(reply);
            t[i] = now() - t0;
        }
        qsort(t, (size_t)n, sizeof *t, compare);
        printf("p50_us=%.0f p99_us=%.0f max_us=%.0f\n", t[n / 2] * 1e6, t[n * 99 / 100] * 1e6, t[n - 1] * 1e6);
        return 0;
    }
    whole_animation = strcmp(argv[1], "animation") == 0;
    if ((strcmp(argv[1], "decode") == 0 || whole_animation) && argc == 5) {
        int n = atoi(argv[2]);
        box = (uint32_t)atoi(argv[3]);
        int file = open(argv[4], O_RDONLY);
        struct stat st;
        if (file < 0 || fstat(file, &st) != 0) die(argv[4], -errno);
        void *bytes = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, file, 0);
        int fd = memfd_create("bench-image", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (bytes == MAP_FAILED || fd < 0 || write(fd, bytes, (size_t)st.st_size) != st.st_size) die("memfd", -errno);
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
        char id[64];
        for (int i = 0; i < n; i++) {
            snprintf(id, sizeof id, "bench-decode-%d-%u-%d", getpid(), box, i);
            sd_bus_message_unref(call(NAME ".ImageCache", "AddImageFromFd", id, fd));
        }
        double t0 = now(), c0 = cpu_now();
        for (int i = 0; i < n; i++) {
            snprintf(id, sizeof id, "bench-decode-%d-%u-%d", getpid(), box, i);
            sd_bus_message *reply = call(NAME ".ImageCache", "OpenPixels", id, -1);
            if (take(reply, 0, 0) < 0) die("map", -1);
            sd_bus_message_unref(reply);
        }
        double s = now() - t0;
        printf("images_per_s=%.2f seconds=%.3f mapped_bytes=%llu cpu_ms=%.1f\n", n / s, s,
               (unsigned long long)mapped_bytes, (cpu_now() - c0) * 1e3);
        return 0;
    }
    fprintf(stderr, "pixels_app: unknown mode %s\n", argv[1]);
    return 64;
}
