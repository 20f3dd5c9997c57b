internal import CLinux
import Glibc

public enum Files {
    /// A regular file's bytes, or nil: opened without blocking (a FIFO in its place would hold
    /// the caller until someone writes to it) and, unless `followLinks`, without following a link;
    /// checked to be a regular file of at most `maxBytes` before a byte is read.
    public static func readRegular(_ path: String, maxBytes: Int, followLinks: Bool = false) -> [UInt8]? {
        guard let (fd, size) = openRegular(path, maxBytes: maxBytes, followLinks: followLinks) else { return nil }
        defer { close(fd) }
        return readPrefix(fd, count: size)
    }

    /// `path` opened read-only as `readRegular` opens it, with its size; nil when it is not a
    /// regular file of at most `maxBytes`. The caller closes the fd.
    public static func openRegular(_ path: String, maxBytes: Int, followLinks: Bool = false) -> (fd: Int32, size: Int)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (followLinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else { return nil }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size >= 0, st.st_size <= maxBytes else {
            close(fd)
            return nil
        }
        return (fd, Int(st.st_size))
    }

    /// The first `count` bytes of the file behind `fd` (read at offset 0, whatever its file
    /// offset), or nil when it has fewer or a read fails.
    /// Bytes waiting to be read on socket `fd` (0 when none or unknown).
    public static func bytesReadable(_ fd: Int32) -> Int {
        max(0, Int(clinux_bytes_readable(fd)))
    }

    /// Whether `fd` is on a FUSE file system (a user's server could hold a read up forever);
    /// true also when that cannot be told.
    public static func isOnFUSE(_ fd: Int32) -> Bool {
        clinux_is_on_fuse(fd) != 0
    }

    public static func readPrefix(_ fd: Int32, count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(done)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return nil }
            done += n
        }
        return bytes
    }
}
