// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// Descriptor passing over the decoder's socket, for both ends (see include/decoder_protocol.h). Kept
// out of the header: the agent's Swift sees plain prototypes, not the socket headers.
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "decoder_protocol.h"

long decoder_send(int sock, const void *buf, size_t len, int fd, int nonblocking) {
    struct iovec iov = {(void *)buf, len};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&control, 0, sizeof control);
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof control.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL | (nonblocking ? MSG_DONTWAIT : 0));
}

long decoder_receive(int sock, void *buf, size_t len, int *fd, int nonblocking) {
    struct iovec iov = {buf, len};
    union { char buf[CMSG_SPACE(sizeof(int) * 4)]; struct cmsghdr align; } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf};
    *fd = -1;
    long n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | (nonblocking ? MSG_DONTWAIT : 0));
    if (n < 0) return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < count; i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
            if (*fd < 0) *fd = got; else close(got);
        }
    }
    if (msg.msg_flags & MSG_TRUNC) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
        errno = EMSGSIZE;
        return -1;
    }
    return n;
}
