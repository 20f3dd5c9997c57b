// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
#include "ccurl.h"

#include <dlfcn.h>
#include <stdio.h>

struct ccurl_api ccurl;

static int loaded;
static char failure[512];

const char *ccurl_load(const char *library) {
    if (loaded) return NULL;
    const char *name = library ? library : "libcurl.so.4";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(failure, sizeof failure, "Downloads need libcurl, which could not be loaded (%s)", dlerror());
        return failure;
    }
    struct ccurl_api api;
#define RESOLVE(field, symbol)                                                                      \
    if (!(*(void **)&api.field = dlsym(lib, #symbol))) {                                            \
        snprintf(failure, sizeof failure, "Downloads need libcurl; %s has no %s", name, #symbol);  \
        dlclose(lib);                                                                               \
        return failure;                                                                             \
    }
    RESOLVE(global_init, curl_global_init)
    RESOLVE(multi_init, curl_multi_init)
    RESOLVE(multi_cleanup, curl_multi_cleanup)
    RESOLVE(multi_setopt, curl_multi_setopt)
    RESOLVE(multi_add_handle, curl_multi_add_handle)
    RESOLVE(multi_remove_handle, curl_multi_remove_handle)
    RESOLVE(multi_socket_action, curl_multi_socket_action)
    RESOLVE(multi_info_read, curl_multi_info_read)
    RESOLVE(easy_init, curl_easy_init)
    RESOLVE(easy_cleanup, curl_easy_cleanup)
    RESOLVE(easy_setopt, curl_easy_setopt)
    RESOLVE(easy_getinfo, curl_easy_getinfo)
    RESOLVE(easy_pause, curl_easy_pause)
    RESOLVE(easy_strerror, curl_easy_strerror)
    RESOLVE(slist_append, curl_slist_append)
    RESOLVE(slist_free_all, curl_slist_free_all)
#undef RESOLVE
    if (api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(failure, sizeof failure, "Downloads need libcurl; %s failed to initialize", name);
        dlclose(lib);
        return failure;
    }
    ccurl = api;
    loaded = 1;  /* never unloaded: libcurl's global state lives until exit */
    return NULL;
}
