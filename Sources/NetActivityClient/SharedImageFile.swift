// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import NetActivityContract

/// A cached image shared as a sealed, read-only memfd: read it or map it; it closes with the value.
public final class SharedImageFile: Sendable {
    public let fd: Int32
    public let size: UInt64

    init(fd: Int32, size: UInt64) {
        self.fd = fd
        self.size = size
    }

    deinit { close(fd) }

    /// The whole image (one copy, from the shared memory into the array).
    public func readAll() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(size))
        var done = 0
        while done < out.count {
            let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(done)) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            done += n
        }
        return Array(out[0..<done])
    }
}
