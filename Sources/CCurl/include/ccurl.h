// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
#ifndef NETACTIVITY_CCURL_SHIM_H
#define NETACTIVITY_CCURL_SHIM_H

/* libcurl for the downloader, loaded at the first download (dlopen), so that an agent that
   only counts activity never maps libcurl and its dependency tree (TLS, Kerberos, LDAP: about
   5 MiB resident). Every call goes through the table `ccurl_load` fills; curl.h is used for its
   types and constants only. curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are
   variadic, which Swift cannot call; the typed wrappers below can. The macros Swift does not
   import are re-exported as constants. */
#include <curl/curl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

/* Loads libcurl (`library`, or "libcurl.so.4" when NULL) once. NULL on success (and on every
   later call), else why not, naming the library: a message that stays valid. */
const char *ccurl_load(const char *library);

/* The libcurl functions the fetcher uses, resolved by ccurl_load. */
struct ccurl_api {
    CURLcode (*global_init)(long flags);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *m);
    CURLMcode (*multi_setopt)(CURLM *m, CURLMoption o, ...);
    CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_socket_action)(CURLM *m, curl_socket_t s, int mask, int *running);
    CURLMsg *(*multi_info_read)(CURLM *m, int *left);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *h);
    CURLcode (*easy_setopt)(CURL *h, CURLoption o, ...);
    CURLcode (*easy_getinfo)(CURL *h, CURLINFO i, ...);
    CURLcode (*easy_pause)(CURL *h, int mask);
    const char *(*easy_strerror)(CURLcode c);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
};
extern struct ccurl_api ccurl;

static const int CCURL_POLL_IN = CURL_POLL_IN;
static const int CCURL_POLL_OUT = CURL_POLL_OUT;
static const int CCURL_POLL_INOUT = CURL_POLL_INOUT;
static const int CCURL_POLL_REMOVE = CURL_POLL_REMOVE;
static const int CCURL_CSELECT_IN = CURL_CSELECT_IN;
static const int CCURL_CSELECT_OUT = CURL_CSELECT_OUT;
static const int CCURL_CSELECT_ERR = CURL_CSELECT_ERR;
static const curl_socket_t CCURL_SOCKET_TIMEOUT = CURL_SOCKET_TIMEOUT;
static const size_t CCURL_WRITEFUNC_PAUSE = CURL_WRITEFUNC_PAUSE;
static const int CCURL_PAUSE_CONT = CURLPAUSE_CONT;

typedef size_t (*ccurl_data_fn)(char *data, size_t size, size_t count, void *user);
typedef int (*ccurl_progress_fn)(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);
typedef int (*ccurl_socket_fn)(CURL *easy, curl_socket_t fd, int what, void *user, void *socket_user);
typedef int (*ccurl_timer_fn)(CURLM *multi, long timeout_ms, void *user);
typedef int (*ccurl_close_fn)(void *user, curl_socket_t fd);
typedef int (*ccurl_prereq_fn)(void *user, char *primary_ip, char *local_ip, int primary_port, int local_port);

/* Every socket libcurl closes goes through this callback (the fetcher stops watching it first). */
static inline CURLcode ccurl_set_close_fn(CURL *h, ccurl_close_fn f, void *user) {
    CURLcode rc = ccurl.easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, f);
    if (rc == CURLE_OK) rc = ccurl.easy_setopt(h, CURLOPT_CLOSESOCKETDATA, user);
    return rc;
}

/* Called when a transfer has its connection (a new one, or one from the pool) and is about to
 * send its request: the connection's local port names its socket (libcurl 7.80). */
static inline CURLcode ccurl_set_prereq_fn(CURL *h, ccurl_prereq_fn f, void *user) {
    CURLcode rc = ccurl.easy_setopt(h, CURLOPT_PREREQFUNCTION, f);
    if (rc == CURLE_OK) rc = ccurl.easy_setopt(h, CURLOPT_PREREQDATA, user);
    return rc;
}

/* Called for every socket libcurl opens for a transfer, with the address it is about to connect to
 * (after DNS; for every redirect): the callback makes the socket, or refuses with CURL_SOCKET_BAD. */
typedef curl_socket_t (*ccurl_opensocket_fn)(void *user, curlsocktype purpose, struct curl_sockaddr *address);
static inline CURLcode ccurl_set_opensocket_fn(CURL *h, ccurl_opensocket_fn f, void *user) {
    CURLcode rc = ccurl.easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, f);
    if (rc == CURLE_OK) rc = ccurl.easy_setopt(h, CURLOPT_OPENSOCKETDATA, user);
    return rc;
}
static const curl_socket_t CCURL_SOCKET_BAD = CURL_SOCKET_BAD;

/* The address of a socket address `length` bytes long, in network order: 4 bytes (IPv4) or 16
 * (IPv6) into `out`, and their count; 0 for any other family. */
static inline int ccurl_address_bytes(const struct sockaddr *a, size_t length, unsigned char out[16]) {
    if (a->sa_family == AF_INET && length >= sizeof(struct sockaddr_in)) {
        memcpy(out, &((const struct sockaddr_in *)a)->sin_addr, 4);
        return 4;
    }
    if (a->sa_family == AF_INET6 && length >= sizeof(struct sockaddr_in6)) {
        memcpy(out, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
        return 16;
    }
    return 0;
}

/* The same for the address libcurl is about to connect to. */
static inline int ccurl_sockaddr_bytes(const struct curl_sockaddr *a, unsigned char out[16]) {
    return ccurl_address_bytes(&a->addr, a->addrlen, out);
}

/* The socket of the connection a finished transfer used, if libcurl still keeps it, else -1. */
static inline curl_socket_t ccurl_info_socket(CURL *h) {
    curl_socket_t s = CURL_SOCKET_BAD;
    if (ccurl.easy_getinfo(h, CURLINFO_ACTIVESOCKET, &s) != CURLE_OK) return CURL_SOCKET_BAD;
    return s;
}

static const long CCURL_HTTP_VERSION_2_0 = CURL_HTTP_VERSION_2_0;

static inline CURLcode ccurl_set_long(CURL *h, CURLoption o, long v) { return ccurl.easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_off(CURL *h, CURLoption o, curl_off_t v) { return ccurl.easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_str(CURL *h, CURLoption o, const char *v) { return ccurl.easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_ptr(CURL *h, CURLoption o, void *v) { return ccurl.easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_slist(CURL *h, CURLoption o, struct curl_slist *v) { return ccurl.easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_write_fn(CURL *h, ccurl_data_fn f) { return ccurl.easy_setopt(h, CURLOPT_WRITEFUNCTION, f); }
static inline CURLcode ccurl_set_header_fn(CURL *h, ccurl_data_fn f) { return ccurl.easy_setopt(h, CURLOPT_HEADERFUNCTION, f); }
static inline CURLcode ccurl_set_progress_fn(CURL *h, ccurl_progress_fn f) { return ccurl.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, f); }

static inline CURLMcode ccurl_multi_set_socket_fn(CURLM *m, ccurl_socket_fn f, void *user) {
    CURLMcode rc = ccurl.multi_setopt(m, CURLMOPT_SOCKETFUNCTION, f);
    return rc != CURLM_OK ? rc : ccurl.multi_setopt(m, CURLMOPT_SOCKETDATA, user);
}
static inline CURLMcode ccurl_multi_set_timer_fn(CURLM *m, ccurl_timer_fn f, void *user) {
    CURLMcode rc = ccurl.multi_setopt(m, CURLMOPT_TIMERFUNCTION, f);
    return rc != CURLM_OK ? rc : ccurl.multi_setopt(m, CURLMOPT_TIMERDATA, user);
}

static inline CURLMcode ccurl_multi_set_long(CURLM *m, CURLMoption o, long v) { return ccurl.multi_setopt(m, o, v); }

static inline long ccurl_info_long(CURL *h, CURLINFO i) {
    long v = 0;
    ccurl.easy_getinfo(h, i, &v);
    return v;
}
static inline void *ccurl_info_private(CURL *h) {
    char *v = NULL;
    ccurl.easy_getinfo(h, CURLINFO_PRIVATE, &v);
    return v;
}
/* A string libcurl keeps (valid until the handle goes), or NULL. */
static inline const char *ccurl_info_string(CURL *h, CURLINFO i) {
    char *v = NULL;
    if (ccurl.easy_getinfo(h, i, &v) != CURLE_OK) return NULL;
    return v;
}
static const int CCURL_ERROR_SIZE = CURL_ERROR_SIZE;
static inline CURLcode ccurl_set_private(CURL *h, void *v) { return ccurl.easy_setopt(h, CURLOPT_PRIVATE, v); }

/* The easy handle and result of a finished transfer from curl_multi_info_read, or NULL. */
static inline CURL *ccurl_next_done(CURLM *m, CURLcode *result) {
    int left = 0;
    CURLMsg *msg;
    while ((msg = ccurl.multi_info_read(m, &left)) != NULL) {
        if (msg->msg == CURLMSG_DONE) {
            *result = msg->data.result;
            return msg->easy_handle;
        }
    }
    return NULL;
}

/* The plain calls, through the table. */
static inline CURLM *ccurl_multi_init(void) { return ccurl.multi_init(); }
static inline CURLMcode ccurl_multi_cleanup(CURLM *m) { return ccurl.multi_cleanup(m); }
static inline CURLMcode ccurl_multi_add_handle(CURLM *m, CURL *h) { return ccurl.multi_add_handle(m, h); }
static inline CURLMcode ccurl_multi_remove_handle(CURLM *m, CURL *h) { return ccurl.multi_remove_handle(m, h); }
static inline CURLMcode ccurl_multi_socket_action(CURLM *m, curl_socket_t s, int mask, int *running) {
    return ccurl.multi_socket_action(m, s, mask, running);
}
static inline CURL *ccurl_easy_init(void) { return ccurl.easy_init(); }
static inline void ccurl_easy_cleanup(CURL *h) { ccurl.easy_cleanup(h); }
static inline CURLcode ccurl_easy_pause(CURL *h, int mask) { return ccurl.easy_pause(h, mask); }
static inline const char *ccurl_easy_strerror(CURLcode c) { return ccurl.easy_strerror(c); }
static inline struct curl_slist *ccurl_slist_append(struct curl_slist *l, const char *s) { return ccurl.slist_append(l, s); }
static inline void ccurl_slist_free_all(struct curl_slist *l) { ccurl.slist_free_all(l); }

#endif
