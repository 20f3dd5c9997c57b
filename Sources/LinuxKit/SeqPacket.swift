import CLinux
import Glibc

/// Connected SOCK_SEQPACKET sockets: one message per send, each with at most one descriptor
/// (a parent and the helper process it starts speak over a pair).
public enum SeqPacket {
    /// A connected pair, close-on-exec; nil with errno set.
    public static func pair() -> (Int32, Int32)? {
        var fds: [Int32] = [-1, -1]
        guard clinux_seqpacket_pair(&fds) == 0 else { return nil }
        return (fds[0], fds[1])
    }

    /// Sends `bytes` as one message with `fd` attached (none when -1), never blocking and never
    /// raising SIGPIPE; the bytes sent, or -1 with errno set.
    public static func send(_ socket: Int32, _ bytes: UnsafeRawBufferPointer, attaching fd: Int32 = -1) -> Int {
        clinux_send_with_fd(socket, bytes.baseAddress, bytes.count, fd)
    }

    /// Receives one message into `buffer` without blocking: its length (0 at the end, -1 with errno
    /// set: EAGAIN when none waits, EMSGSIZE for one longer than the buffer) and its first
    /// descriptor (close-on-exec; -1 when none came; any others are closed).
    public static func receive(_ socket: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, fd: Int32) {
        var fd: Int32 = -1
        let n = clinux_recv_with_fd(socket, buffer.baseAddress, buffer.count, &fd)
        return (n, fd)
    }
}

extension ServiceProcess {
    /// A descriptor that turns readable when child `pid` ends (pidfd_open), or -1.
    public static func pidfd(of pid: Int32) -> Int32 {
        clinux_pidfd_open(pid)
    }
}
