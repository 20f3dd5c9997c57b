import Glibc

public enum Files {
    /// A regular file's bytes, or nil: opened without blocking (a FIFO in its place would hold
    /// the caller until someone writes to it) and, unless `followLinks`, without following a link;
    /// checked to be a regular file of at most `maxBytes` before a byte is read.
    public static func readRegular(_ path: String, maxBytes: Int, followLinks: Bool = false) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (followLinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size >= 0, st.st_size <= maxBytes else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return nil }
            done += n
        }
        return bytes
    }
}
