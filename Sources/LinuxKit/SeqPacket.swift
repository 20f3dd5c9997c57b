// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import CLinux
import Glibc

/// Connected SOCK_SEQPACKET sockets: one message per send (a parent and the helper process it
/// starts speak over a pair).
public enum SeqPacket {
    /// A connected pair, close-on-exec; nil with errno set.
    public static func pair() -> (Int32, Int32)? {
        var fds: [Int32] = [-1, -1]
        guard clinux_seqpacket_pair(&fds) == 0 else { return nil }
        return (fds[0], fds[1])
    }
}

extension ServiceProcess {
    /// A descriptor that turns readable when child `pid` ends (pidfd_open), or -1.
    public static func pidfd(of pid: Int32) -> Int32 {
        clinux_pidfd_open(pid)
    }
}
