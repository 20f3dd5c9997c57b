#ifndef NETACTIVITY_CCURL_SHIM_H
#define NETACTIVITY_CCURL_SHIM_H

/* libcurl for the downloader: curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are
   variadic, which Swift cannot call; these typed wrappers can. The macros Swift does not import
   are re-exported as constants. */
#include <curl/curl.h>

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

/* Every socket libcurl closes goes through this callback (the fetcher stops watching it first). */
static inline CURLcode ccurl_set_close_fn(CURL *h, ccurl_close_fn f, void *user) {
    CURLcode rc = curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, f);
    if (rc == CURLE_OK) rc = curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, user);
    return rc;
}

/* The socket of the connection a finished transfer used, if libcurl still keeps it, else -1. */
static inline curl_socket_t ccurl_info_socket(CURL *h) {
    curl_socket_t s = CURL_SOCKET_BAD;
    if (curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &s) != CURLE_OK) return CURL_SOCKET_BAD;
    return s;
}

static const long CCURL_HTTP_VERSION_2_0 = CURL_HTTP_VERSION_2_0;

static inline CURLcode ccurl_set_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_ptr(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_write_fn(CURL *h, ccurl_data_fn f) { return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f); }
static inline CURLcode ccurl_set_header_fn(CURL *h, ccurl_data_fn f) { return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f); }
static inline CURLcode ccurl_set_progress_fn(CURL *h, ccurl_progress_fn f) { return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, f); }

static inline CURLMcode ccurl_multi_set_socket_fn(CURLM *m, ccurl_socket_fn f, void *user) {
    CURLMcode rc = curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, f);
    return rc != CURLM_OK ? rc : curl_multi_setopt(m, CURLMOPT_SOCKETDATA, user);
}
static inline CURLMcode ccurl_multi_set_timer_fn(CURLM *m, ccurl_timer_fn f, void *user) {
    CURLMcode rc = curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, f);
    return rc != CURLM_OK ? rc : curl_multi_setopt(m, CURLMOPT_TIMERDATA, user);
}

static inline long ccurl_info_long(CURL *h, CURLINFO i) {
    long v = 0;
    curl_easy_getinfo(h, i, &v);
    return v;
}
static inline void *ccurl_info_private(CURL *h) {
    char *v = NULL;
    curl_easy_getinfo(h, CURLINFO_PRIVATE, &v);
    return v;
}
static inline CURLcode ccurl_set_private(CURL *h, void *v) { return curl_easy_setopt(h, CURLOPT_PRIVATE, v); }

/* The easy handle and result of a finished transfer from curl_multi_info_read, or NULL. */
static inline CURL *ccurl_next_done(CURLM *m, CURLcode *result) {
    int left = 0;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(m, &left)) != NULL) {
        if (msg->msg == CURLMSG_DONE) {
            *result = msg->data.result;
            return msg->easy_handle;
        }
    }
    return NULL;
}

#endif
