// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import NetActivityCore

/// open(2)'s O_PATH, which Glibc's module does not export: a descriptor that only names a file,
/// opened without asking the file's file system anything.
private let oPath: Int32 = 0o10000000

/// A process's identity read from procfs, pinned to one process: every file is opened through one
/// `/proc/PID` directory descriptor (a pid reused after that fails to read, ESRCH), and the process
/// must have started before `startedBy` (the clock tick in which its connection appeared on the bus,
/// or its first call: a process that started later holds a recycled pid and is not the peer). Both
/// are whole ticks, as the kernel counts start times: a process that started in that very tick may
/// be the peer or a recycled pid's next owner, so it is never lent a scoped identity (a Flatpak's, a
/// Snap's, an app unit's); it is known only as a process of the unscoped pool.
///
/// Runs off the loop (`IdentityReaders`), and never asks a FUSE server anything: a client can make
/// its own root, or its `/.flatpak-info`, a FUSE file whose server never answers. The root and the
/// file are opened `O_PATH` (no file system call), their mounts looked up in the process's own
/// mount table, and a file on FUSE, or on a mount the table does not show, is never read: such a
/// process's identity is unknown.
enum ProcessIdentity {
    /// `proc`: where procfs is (a tree of the same shape in the tests).
    static func read(pid: UInt32, startedBy: UInt64, proc: String = "/proc") -> ClientIdentity? {
        let dir = open("\(proc)/\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dir >= 0 else { return nil }
        defer { close(dir) }
        guard let stat = readSmall(at: dir, "stat"), let started = AppIdentity.startTime(stat: stat),
            started <= startedBy
        else { return nil }
        let tie = started == startedBy
        let cgroup = readSmall(at: dir, "cgroup") ?? ""
        let label = readSmall(at: dir, "attr/current") ?? ""
        let info: String?
        switch flatpakInfo(at: dir) {
        case .read(let text): info = text
        case .unsafe: return nil
        case .denied:
            // Another user's process (root on a session bus whose policy lets it in) is no app of
            // ours to sandbox; one of ours that hides its root (not dumpable) is not known.
            guard let status = readSmall(at: dir, "status"), let uid = effectiveUID(status: status), uid != getuid()
            else {
                return nil
            }
            info = nil
        }
        let identity = AppIdentity.identify(
            pid: pid, uid: getuid(), cgroup: cgroup, flatpakInfo: info, securityLabel: label)
        // Read once more: a process that exited meanwhile (its files read empty) is not trusted.
        guard let again = readSmall(at: dir, "stat"), AppIdentity.startTime(stat: again) == started else { return nil }
        // Within the tick of the connection's arrival, only the unscoped pool's rights are given.
        guard !tie || identity == .unscoped(pid: pid) else { return nil }
        return identity
    }

    enum FlatpakInfo: Equatable {
        /// The file's text, or nil when the process's root has none.
        case read(String?)
        /// It could not be read without the risk of waiting on a FUSE server.
        case unsafe
        /// The process's root may not be looked at (another user's, or one not dumpable).
        case denied
    }

    /// The effective uid of `/proc/PID/status`'s `Uid:` line (real, effective, saved, fs).
    static func effectiveUID(status: String) -> UInt32? {
        for line in status.split(separator: "\n") where line.hasPrefix("Uid:") {
            let ids = line.dropFirst(4).split(whereSeparator: { $0 == "\t" || $0 == " " })
            return ids.count >= 2 ? UInt32(ids[1]) : nil
        }
        return nil
    }

    /// `/.flatpak-info` in the root of the process whose `/proc/PID` is `dir`, as
    /// xdg-desktop-portal reads it, without any call a FUSE server answers.
    static func flatpakInfo(at dir: Int32) -> FlatpakInfo {
        // The magic link is followed without a lookup in the file system it leads to.
        let root = openat(dir, "root", oPath | O_CLOEXEC)
        guard root >= 0 else { return errno == EACCES || errno == EPERM ? .denied : .unsafe }
        defer { close(root) }
        guard let mounts = readSmall(at: dir, "mountinfo", limit: 1 << 20) else { return .unsafe }
        guard MountTable.isSafe(fd: root, mountinfo: mounts) else { return .unsafe }
        // A lookup in the root's own file system, which is not FUSE.
        let file = openat(root, ".flatpak-info", oPath | O_NOFOLLOW | O_CLOEXEC)
        guard file >= 0 else { return errno == ENOENT ? .read(nil) : .unsafe }
        defer { close(file) }
        // A file bound over it may be on another mount (a real Flatpak's is a tmpfs file).
        var st = Glibc.stat()
        guard MountTable.isSafe(fd: file, mountinfo: mounts), fstat(file, &st) == 0 else { return .unsafe }
        guard st.st_mode & S_IFMT == S_IFREG, st.st_size <= 65536 else { return .read(nil) }
        // Opened again from the descriptor itself: no second lookup that a mount could change.
        let fd = open("/proc/self/fd/\(file)", O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return .unsafe }
        defer { close(fd) }
        return .read(readText(fd, limit: 65536))
    }

    /// CLOCK_BOOTTIME in whole clock ticks, as the kernel counts /proc/PID/stat's start time (its
    /// boot-time nanoseconds divided down, rounded down).
    static func bootTicks() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)
        let hz = UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
        return UInt64(ts.tv_sec) * hz + UInt64(ts.tv_nsec) * hz / 1_000_000_000
    }

    /// A procfs file of at most `limit` bytes under `dir`; nil when absent, refused or longer.
    static func readSmall(at dir: Int32, _ path: String, limit: Int = 65536) -> String? {
        let fd = openat(dir, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return readText(fd, limit: limit)
    }

    /// The file's text to its end, or nil past `limit` bytes (`Files.readToEnd`).
    private static func readText(_ fd: Int32, limit: Int) -> String? {
        Files.readToEnd(fd, limit: limit).map { String(decoding: $0, as: UTF8.self) }
    }
}

/// A process's mount table (`/proc/PID/mountinfo`), read to tell where an `O_PATH` descriptor is.
enum MountTable {
    /// Whether the file behind `fd` is on a mount the table shows, of a file system other than FUSE.
    /// A mount missing from the table is one the process's root hides (a root inside a FUSE
    /// mount's subtree), and is not safe either.
    static func isSafe(fd: Int32, mountinfo: String) -> Bool {
        guard let id = mountID(of: fd), let type = fileSystem(ofMount: id, in: mountinfo) else { return false }
        return !type.hasPrefix("fuse")
    }

    /// `mnt_id` of `/proc/self/fdinfo/FD`.
    static func mountID(of fd: Int32) -> Int? {
        guard let text = ProcessIdentity.readSmall(at: AT_FDCWD, "/proc/self/fdinfo/\(fd)", limit: 4096) else {
            return nil
        }
        for line in text.split(separator: "\n") where line.hasPrefix("mnt_id:") {
            return line.dropFirst(7).split(whereSeparator: { $0 == "\t" || $0 == " " }).first.flatMap { Int($0) }
        }
        return nil
    }

    /// The file system type of mount `id` in a mountinfo text (proc(5): "ID PARENT MAJ:MIN ROOT
    /// POINT OPTIONS [TAGS...] - TYPE SOURCE SUPER"); nil when the table has no such mount.
    static func fileSystem(ofMount id: Int, in mountinfo: String) -> String? {
        let wanted = String(id)
        for line in mountinfo.split(separator: "\n") {
            guard let space = line.firstIndex(of: " "), line[..<space] == wanted else { continue }
            // The optional tags end at a lone "-".
            let fields = line.split(separator: " ")
            guard let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { return nil }
            return String(fields[dash + 1])
        }
        return nil
    }
}

/// Reads processes' identities off the loop, one after another on one thread (a read takes tens of
/// microseconds), and hands each back through the loop's mailbox. A read held by something the
/// checks above did not foresee leaves that thread to it: later reads go to a new one (the
/// registry's timeout gives the held peer's calls the least rights).
final class IdentityReaders {
    private let mailbox: EventLoop.Mailbox
    private let threads = StallTolerantWorker(name: "netactivity-id", maxThreads: 4, stuckAfterNanoseconds: 100_000_000)

    init(mailbox: EventLoop.Mailbox) { self.mailbox = mailbox }

    /// `done` runs on the loop's thread with what `lookUp` found for `app` (a desktop entry, read
    /// from files a client may point into FUSE) and the process's own name.
    func readName(
        app: String, pid: UInt32, lookUp: @escaping @Sendable (String) -> DesktopEntry?,
        _ done: @escaping (DesktopEntry?, String) -> Void
    ) {
        let back = UncheckedSendable(done)
        let mailbox = mailbox
        threads.run {
            let entry = UncheckedSendable(lookUp(app))
            let name = ServiceProcess.processName(pid: pid)
            mailbox.post { back.value(entry.value, name) }
        }
    }

    /// `done` runs on the loop's thread with the identity, or nil when it cannot be known.
    func read(pid: UInt32, startedBy: UInt64, _ done: @escaping (ClientIdentity?) -> Void) {
        let back = UncheckedSendable(done)
        let mailbox = mailbox
        threads.run {
            let identity = ProcessIdentity.read(pid: pid, startedBy: startedBy)
            mailbox.post { back.value(identity) }
        }
    }
}
