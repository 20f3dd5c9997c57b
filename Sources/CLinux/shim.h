// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
#ifndef NETACTIVITY_CLINUX_SHIM_H
#define NETACTIVITY_CLINUX_SHIM_H

/* The Linux calls LinuxKit needs that Swift's Glibc module does not import: eventfd, signalfd
   with a blocked signal set, memfd_create and file seals, malloc_trim. The only C the platform module
   sees. */

#include <stdint.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <signal.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <time.h>
#include <sys/vfs.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <libintl.h>
#include <locale.h>
#include <sys/socket.h>
#include <string.h>
#include <malloc.h>

/* gettext (libintl.h does not import into Swift's Glibc module): messages of `domain`, bound to
   `dir`, in UTF-8, for the locale the environment asks for (LC_MESSAGES and LC_CTYPE only). */
static inline void clinux_bind_text_domain(const char *domain, const char *dir) {
    setlocale(LC_MESSAGES, "");
    setlocale(LC_CTYPE, "");
    bindtextdomain(domain, dir);
    bind_textdomain_codeset(domain, "UTF-8");
}

static inline const char *clinux_dgettext(const char *domain, const char *msgid) {
    return dgettext(domain, msgid);
}

/* copy_file_range(2) (glibc declares it only with _GNU_SOURCE): the raw syscall. */
static inline long clinux_copy_file_range(int in_fd, long long *in_off, int out_fd, size_t len) {
    return syscall(SYS_copy_file_range, in_fd, (loff_t *)in_off, out_fd, (loff_t *)0, len, 0u);
}

/* openat2(2) (glibc has no wrapper) of `name` under the directory `dirfd`, read-only, non-blocking,
   without a controlling terminal: links are followed, but never a magic link (/proc/PID/root,
   /proc/PID/fd/N) and never across a mount, so what it opens is on the directory's own mount
   (RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV). -1 with errno ENOSYS on kernels before 5.6. */
struct clinux_open_how { unsigned long long flags, mode, resolve; };
static inline int clinux_open_on_same_mount(int dirfd, const char *name) {
    struct clinux_open_how how = {O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0, 0x01 | 0x02};
#ifdef SYS_openat2
    return (int)syscall(SYS_openat2, dirfd, name, &how, sizeof how);
#else
    return (int)syscall(437, dirfd, name, &how, sizeof how);
#endif
}

/* pipe2(2) with O_CLOEXEC, and O_NONBLOCK when `nonblocking` (glibc declares pipe2 only with
   _GNU_SOURCE): the raw syscall. */
static inline int clinux_pipe_cloexec(int fds[2], int nonblocking) {
    return (int)syscall(SYS_pipe2, fds, O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0));
}

/* Opens `path` for writing with O_DIRECT (which glibc defines only with _GNU_SOURCE; its value is
   the architecture's). -1 with errno EINVAL where it is not known here. */
static inline int clinux_open_direct(const char *path) {
#if defined(__x86_64__) || defined(__i386__)
    return open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | 040000);
#elif defined(__aarch64__) || defined(__arm__)
    return open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | 0200000);
#else
    errno = EINVAL;
    return -1;
#endif
}

/* sendfile(2), from in_fd at *offset to out_fd's position. */
static inline long clinux_sendfile(int out_fd, int in_fd, long long *offset, size_t len) {
    off_t o = (off_t)*offset;
    long n = sendfile(out_fd, in_fd, &o, len);
    *offset = (long long)o;
    return n;
}

/* sigset manipulation macros/functions are awkward from Swift: a tiny helper that blocks
   the termination signals and returns a signalfd for them. */
static inline int clinux_block_signals_signalfd(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &set, 0) != 0) return -1;
    /* A client that dies before reading its reply must not kill the agent, and neither may a
       file size limit (RLIMIT_FSIZE) on the disk tier: a write past it fails with EFBIG instead. */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* A non-blocking eventfd for waking an event loop from another thread (eventfd(2) does not
   import into Swift's Glibc module). */
/* Names the calling thread (at most 15 bytes show in top, ps -L and gdb). */
static inline int clinux_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

static inline int clinux_eventfd(void) {
    return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

/* Sealed memfds (the image cache's zero-copy path). memfd_create and the seal constants need
   _GNU_SOURCE, which the Swift Glibc module is not built with: use the raw syscall and the
   kernel's constant values. */
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#define F_GET_SEALS 1034
#define F_SEAL_SEAL 0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#define F_SEAL_WRITE 0x0008
#endif
static const int CLINUX_SEALS_READ_ONLY = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
static const int CLINUX_SEAL_SEAL = F_SEAL_SEAL;

/* An empty memfd that can be sealed later (a body written as it arrives), or -1 with errno set. */
static inline int clinux_memfd(const char *name) {
    return (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
}

/* Seals a memfd read-only (no writable mapping of it may exist): 0, or -1 with errno set. */
static inline int clinux_seal_read_only(int fd) {
    return fcntl(fd, F_ADD_SEALS, CLINUX_SEALS_READ_ONLY);
}

/* A memfd holding a copy of `data`, sealed so that nobody (its holders included) can write,
   shrink, grow or unseal it. Returns the fd, or -1 with errno set. */
static inline int clinux_sealed_memfd(const char *name, const void *data, size_t length) {
    int fd = clinux_memfd(name);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < length) {
        ssize_t n = pwrite(fd, (const char *)data + done, length - done, (off_t)done);
        if (n < 0) {
            if (errno == EINTR) continue;
            goto fail;
        }
        done += (size_t)n;
    }
    if (clinux_seal_read_only(fd) != 0) goto fail;
    return fd;
fail: {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
}

/* Sets the calling thread's nice value (Linux keeps one per thread): 0, or -1 with errno set. */
static inline int clinux_set_thread_nice(int nice) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
}

/* A condition variable whose timed waits use CLOCK_MONOTONIC (wall-clock jumps do not move them). */
static inline int clinux_cond_init_monotonic(pthread_cond_t *cond) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

/* 1 when fd is on a FUSE file system (whose server could hold a read up forever), 0 when not,
   -1 with errno set. */
static inline int clinux_is_on_fuse(int fd) {
    struct statfs fs;
    if (fstatfs(fd, &fs) != 0) return -1;
    return fs.f_type == 0x65735546 ? 1 : 0;
}

/* Bytes waiting to be read on a socket (FIONREAD), or -1. */
static inline int clinux_bytes_readable(int fd) {
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

/* The seals on an fd (F_GET_SEALS), or -1. */
static inline int clinux_get_seals(int fd) {
    return fcntl(fd, F_GET_SEALS);
}

/* A pair of connected SOCK_SEQPACKET sockets (one message per send), close-on-exec. */
static inline int clinux_seqpacket_pair(int fds[2]) {
    return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds);
}

/* A descriptor that turns readable when process `pid` ends (pidfd_open), or -1. */
static inline int clinux_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

#endif
