// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
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
    public static func openRegular(_ path: String, maxBytes: Int, followLinks: Bool = false) -> (fd: Int32, size: Int)?
    {
        // O_NOCTTY: a link to a terminal never becomes our controlling one before fstat refuses it.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (followLinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else { return nil }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size >= 0, st.st_size <= maxBytes else {
            close(fd)
            return nil
        }
        return (fd, Int(st.st_size))
    }

    /// `name` in the folder `directory` opened read-only, with its size, when it is a regular file
    /// of at most `maxBytes` on the folder's own mount: links are followed within that mount only,
    /// never through a magic link (`/proc/PID/root`) nor into another mount, so a link a user's
    /// process planted cannot lead the open into a FUSE mount whose server never answers. (Where
    /// the kernel has no openat2, links are followed as `openRegular` follows them.) The caller
    /// closes the fd.
    public static func openRegular(in directory: String, _ name: String, maxBytes: Int) -> (fd: Int32, size: Int)? {
        let folder = open(directory, 0o10000000 /* O_PATH: no file system call */ | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { return nil }
        defer { close(folder) }
        var fd = clinux_open_on_same_mount(folder, name)
        if fd < 0, errno == ENOSYS {
            fd = openat(folder, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        }
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

    /// The bytes of `fd` from its position to its end, read 4 KiB at a time (procfs files, whose
    /// size says nothing: a large buffer for each would stay in the reading thread's heap); nil
    /// past `limit` bytes. A read that fails ends it with what came before.
    public static func readToEnd(_ fd: Int32, limit: Int) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count <= limit {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            bytes.append(contentsOf: chunk[..<n])
        }
        return bytes.count <= limit ? bytes : nil
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

    /// Whether copy_file_range(2) copies between the files asked so far (a memfd and a file on
    /// another file system: not on kernels since 5.19, EXDEV; sendfile(2) does it then).
    nonisolated(unsafe) private static var copyFileRangeWorks = true

    /// Copies `count` bytes from `source` (from offset 0) to `out` at its position, in the kernel
    /// (copy_file_range, else sendfile), at most `piece` bytes per call. 0, or the errno.
    public static func copy(from source: Int32, count: Int, to out: Int32, piece: Int) -> Int32 {
        var offset: Int64 = 0
        while offset < Int64(count) {
            let length = min(Int64(count) - offset, Int64(piece))
            var n = -1
            if copyFileRangeWorks {
                n = clinux_copy_file_range(source, &offset, out, Int(length))
                if n < 0, [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP].contains(errno) { copyFileRangeWorks = false }
            }
            if n < 0, !copyFileRangeWorks { n = clinux_sendfile(out, source, &offset, Int(length)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return n == 0 ? EIO : errno }
        }
        return 0
    }

    /// Writes all of `bytes` to `fd` at its position, at most `piece` bytes per call. 0, or the errno.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, piece: Int = .max) -> Int32 {
        var done = 0
        while done < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + done, min(bytes.count - done, piece))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return n == 0 ? ENOSPC : errno }
            done += n
        }
        return 0
    }

    /// `path` opened for writing with O_DIRECT (no page cache); nil with errno set (EINVAL: the
    /// file system takes no O_DIRECT).
    public static func openDirect(_ path: String) -> Int32? {
        let fd = clinux_open_direct(path)
        return fd >= 0 ? fd : nil
    }
}
