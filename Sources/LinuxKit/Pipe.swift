// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CLinux
import Glibc

/// A pipe whose ends are close-on-exec and non-blocking (the agent's leases).
public func makeLeasePipe() -> (read: Int32, write: Int32)? {
    makeCloseOnExecPipe(nonBlocking: true)
}

/// A pipe whose ends are close-on-exec from their creation: a process another thread spawns at
/// that moment does not inherit them (a write end held by a stranger's child never reads EOF).
public func makeCloseOnExecPipe(nonBlocking: Bool = false) -> (read: Int32, write: Int32)? {
    var fds: [Int32] = [-1, -1]
    guard clinux_pipe_cloexec(&fds, nonBlocking ? 1 : 0) == 0 else { return nil }
    return (fds[0], fds[1])
}

/// Read-only shared memory for passing large data by fd (the image cache's zero-copy path).
public enum SealedMemory {
    /// A sealed memfd holding a copy of `bytes` (nobody can write, shrink, grow or unseal it),
    /// or nil with errno set.
    public static func make(name: String, bytes: UnsafeRawBufferPointer) -> Int32? {
        let fd = clinux_sealed_memfd(name, bytes.baseAddress, bytes.count)
        return fd >= 0 ? fd : nil
    }

    /// A new, read-only open of the memfd behind `fd`: its own file offset (a duplicate would share
    /// ours with every holder), and no write access even before the seals are checked. Nil with
    /// errno set.
    public static func reopenReadOnly(_ fd: Int32) -> Int32? {
        let copy = open("/proc/self/fd/\(fd)", O_RDONLY | O_CLOEXEC)
        return copy >= 0 ? copy : nil
    }

    /// A read-only open of the sealed memfd behind `fd` for one client (its own file offset, so
    /// one client's reads never move another's), whatever any holder did to the file: a holder
    /// can change the file's mode (`fchmod` needs no write access), which fails a reopen through
    /// `/proc`; the mode is then put back, and failing that, the client gets a copy of the `count`
    /// bytes in a memfd of its own. Nil with errno set.
    public static func openForClient(_ fd: Int32, count: Int) -> Int32? {
        if let copy = reopenReadOnly(fd) { return copy }
        guard errno == EACCES || errno == EPERM else { return nil }
        if fchmod(fd, 0o400) == 0, let copy = reopenReadOnly(fd) { return copy }
        guard count > 0, let map = mmap(nil, count, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { return nil }
        defer { munmap(map, count) }
        return make(name: "netactivity-image", bytes: UnsafeRawBufferPointer(start: map, count: count))
    }

    /// An empty, sealable memfd for data written as it arrives, then `sealReadOnly`; nil with errno set.
    public static func makeEmpty(name: String) -> Int32? {
        let fd = clinux_memfd(name)
        return fd >= 0 ? fd : nil
    }

    /// Seals a memfd from `makeEmpty` read-only (no writable mapping of it may exist); false with errno set.
    public static func sealReadOnly(_ fd: Int32) -> Bool {
        clinux_seal_read_only(fd) == 0
    }

    /// The seals a client's memfd must carry for the agent to keep it as it is: nobody can write,
    /// shrink or grow it (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW).
    public static let requiredForAdoption: Int32 = CLINUX_SEALS_READ_ONLY & ~CLINUX_SEAL_SEAL

    /// Whether `fd` is a memfd (F_GET_SEALS answers for shmem files only, and never asks a file
    /// system: safe on a descriptor of a FUSE file).
    public static func isMemfd(_ fd: Int32) -> Bool {
        clinux_get_seals(fd) >= 0
    }

    /// The seals on `fd` (0 when it takes none: not a memfd).
    public static func seals(of fd: Int32) -> Int32 {
        max(0, clinux_get_seals(fd))
    }

    /// Whether `fd` carries all the read-only seals.
    public static func isSealedReadOnly(_ fd: Int32) -> Bool {
        let seals = clinux_get_seals(fd)
        return seals >= 0 && seals & CLINUX_SEALS_READ_ONLY == CLINUX_SEALS_READ_ONLY
    }
}
