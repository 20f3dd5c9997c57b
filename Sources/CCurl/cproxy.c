// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
#include "cproxy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GLib's types, as far as these calls need them. */
typedef struct {
    unsigned int domain;
    int code;
    char *message;
} GErrorPart;

static struct {
    void *(*get_default)(void);
    char **(*lookup)(void *resolver, const char *uri, void *cancellable, GErrorPart **error);
    void (*strfreev)(char **list);
    void (*free)(void *p);
    void (*error_free)(GErrorPart *e);
    int (*iteration)(void *context, int may_block);
    const char *(*type_name_from_instance)(void *instance);
} gio;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;
static void *resolver;
static char failure[512];

const char *cproxy_load(const char *library) {
    pthread_mutex_lock(&lock);
    if (loaded) {
        pthread_mutex_unlock(&lock);
        return NULL;
    }
    const char *name = library ? library : "libgio-2.0.so.0";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    void *gobject = lib ? dlopen("libgobject-2.0.so.0", RTLD_NOW | RTLD_LOCAL) : NULL;
    void *glib = gobject ? dlopen("libglib-2.0.so.0", RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!glib) {
        snprintf(failure, sizeof failure, "The desktop's proxy settings need GIO, which could not be loaded (%s)",
                 dlerror());
        pthread_mutex_unlock(&lock);
        return failure;
    }
#define RESOLVE(handle, field, symbol)                                                                \
    if (!(*(void **)&gio.field = dlsym(handle, #symbol))) {                                           \
        snprintf(failure, sizeof failure, "The desktop's proxy settings need GIO; %s has no %s", name, \
                 #symbol);                                                                            \
        pthread_mutex_unlock(&lock);                                                                  \
        return failure;                                                                               \
    }
    RESOLVE(lib, get_default, g_proxy_resolver_get_default)
    RESOLVE(lib, lookup, g_proxy_resolver_lookup)
    RESOLVE(glib, strfreev, g_strfreev)
    RESOLVE(glib, free, g_free)
    RESOLVE(glib, error_free, g_error_free)
    RESOLVE(glib, iteration, g_main_context_iteration)
    RESOLVE(gobject, type_name_from_instance, g_type_name_from_instance)
#undef RESOLVE
    /* Never unloaded: GLib's types and threads live until exit. */
    resolver = gio.get_default();
    loaded = 1;
    pthread_mutex_unlock(&lock);
    return NULL;
}

char **cproxy_lookup(const char *url, char **error) {
    /* GNOME's resolver learns of changed settings from GSettings' "changed" signal, which is
       delivered in GLib's default main context: take in what is pending (never waiting). The
       context is GIO's alone in this process. */
    while (gio.iteration(NULL, 0)) {
    }
    GErrorPart *e = NULL;
    char **list = gio.lookup(resolver, url, NULL, &e);
    if (!list) {
        *error = strdup(e && e->message ? e->message : "the proxy resolver gave no answer");
        if (e) gio.error_free(e);
    }
    return list;
}

void cproxy_free(char **list) { gio.strfreev(list); }

void cproxy_free_string(char *string) { free(string); }

const char *cproxy_resolver_name(void) { return loaded ? gio.type_name_from_instance(resolver) : ""; }
