// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import Logging
import NetActivityCore

/// The downloader's disk tier in `$XDG_CACHE_HOME/netactivity` (else `~/.cache/netactivity`):
/// a directory of 0700 holding one 0600 file per entry, named by the SHA-256 of its key, each a
/// `DiskEntry` with a checksum. Writes go to a temporary file that is renamed into place, so a
/// reader never sees half an entry; a damaged entry is deleted, never served. `capacity` is
/// enforced at write time by deleting the least recently used entries (recency survives restarts
/// through the files' modification times, which reads refresh).
///
/// Nothing touches the disk until the first download (or a read of DiskUsage or DiskError).
/// Only the disk worker thread touches a DiskCache (`DiskTier` hands it the work); `journal`
/// tells the loop which entries came and went.
final class DiskCache: @unchecked Sendable {
    // @unchecked: confined to the disk worker thread (see DiskTier).
    let directory: String
    var capacity: UInt64 { index.capacity }
    private let logger: Logger
    /// Each file's size, app (entries from an earlier run belong to "", unknown) and last use, in
    /// recency order, and what may make room for what.
    private var index: DiskIndex
    private var ready = false
    private(set) var broken = false
    /// The directory's lock, held for the agent's life (closed with the process).
    private var lockFD: Int32 = -1
    /// Entries that came (true) and went (false) since `takeJournal`, in order.
    private var journal: [(name: String, present: Bool)] = []

    func takeJournal() -> [(name: String, present: Bool)] {
        defer { journal = [] }
        return journal
    }

    static let defaultCapacity: UInt64 = 150 * 1024 * 1024
    static let writePiece = 128 * 1024
    /// Bodies from this size on are written with O_DIRECT (see `ImageBody.writeDirect`).
    static let directFrom = 256 * 1024

    init(directory: String, capacity: UInt64 = DiskCache.defaultCapacity, logger: Logger) {
        self.directory = directory
        index = DiskIndex(capacity: capacity)
        self.logger = logger
    }

    /// `$XDG_CACHE_HOME/netactivity`, else `$HOME/.cache/netactivity`.
    static func defaultDirectory() -> String? {
        func env(_ name: String) -> String? {
            getenv(name).map { String(cString: $0) }.flatMap { $0.hasPrefix("/") ? $0 : nil }
        }
        if let base = env("XDG_CACHE_HOME") { return base + "/netactivity" }
        if let home = env("HOME") { return home + "/.cache/netactivity" }
        return nil
    }

    var usage: UInt64 {
        prepare()
        return index.usage
    }

    var count: Int {
        prepare()
        return index.count
    }

    /// Creates the directory (0700) and indexes what a previous run left.
    private func prepare() {
        guard !ready else { return }
        ready = true
        var path = ""
        for part in directory.split(separator: "/") {
            path += "/" + part
            if mkdir(path, 0o700) != 0, errno != EEXIST {
                lastError = "cannot create \(path): \(String(cString: strerror(errno)))"
                logger.warning("Disk cache off: \(lastError)")
                broken = true
                return
            }
        }
        // One writer per directory: a second agent of the same user (a second session) keeps its
        // images in memory, so the two never pass DiskCapacity together or delete each other's entries.
        // The lock is on the directory itself (flock works on a directory's fd): no extra file.
        lockFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
        guard lockFD >= 0 else {
            // O_NOFOLLOW: a symbolic link in the directory's place is not followed, and its target
            // (someone else's folder, maybe) never has its mode changed.
            lastError =
                errno == ELOOP || errno == ENOTDIR
                ? "\(directory) is not a directory of its own (a symbolic link?); the memory cache goes on"
                : "cannot lock \(directory): \(String(cString: strerror(errno)))"
            logger.warning("Disk cache off: \(lastError)")
            broken = true
            return
        }
        fchmod(lockFD, 0o700)
        guard flock(lockFD, LOCK_EX | LOCK_NB) == 0 else {
            lastError = "another netactivityd uses \(directory); this one keeps images in memory only"
            logger.notice("Disk cache off: \(lastError)")
            close(lockFD)
            lockFD = -1
            broken = true
            return
        }
        guard let dir = opendir(directory) else {
            lastError = "cannot read \(directory): \(String(cString: strerror(errno)))"
            logger.warning("Disk cache off: \(lastError)")
            broken = true
            return
        }
        defer { closedir(dir) }
        var found: [(name: String, size: UInt64, time: Double)] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name.hasPrefix("tmp-") {
                unlink(directory + "/" + name)  // a write that a crash interrupted
                continue
            }
            guard name.utf8.count == 64 else { continue }
            var st = stat()
            guard lstat(directory + "/" + name, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            found.append((name, UInt64(st.st_size), Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9))
        }
        for f in found.sorted(by: { $0.time < $1.time }) {
            index.load(f.name, size: f.size, lastUse: f.time)
            journal.append((f.name, true))
        }
        forget(index.shrinkToCapacity())
    }

    /// The entry for `key`, refreshed as the most recently used; nil when absent or damaged
    /// (a damaged file is deleted). A large body comes back in a sealed memfd (`ImageBody`).
    func read(key: String) -> (info: CachedResponseInfo, body: ImageBody)? {
        prepare()
        let name = DiskEntry.fileName(for: key)
        guard !broken, index.contains(name) else { return nil }
        let path = directory + "/" + name
        guard let hit = Self.readEntry(path, maxBytes: Int(min(capacity, UInt64(Int.max / 2))) + 1 << 20),
            hit.key == key
        else {
            logger.notice("Dropped a damaged disk cache entry \(name)")
            drop(name)
            return nil
        }
        index.touch(name, at: Self.now())
        utimensat(AT_FDCWD, path, nil, 0)  // recency for the next run
        return (hit.info, hit.body)
    }

    /// The entry for `key` was used (served from memory while a prefetch runs): it becomes the
    /// most recent, so no prefetch takes its room.
    func touch(key: String) {
        prepare()
        let name = DiskEntry.fileName(for: key)
        guard !broken, index.touch(name, at: Self.now()) else { return }
        utimensat(AT_FDCWD, directory + "/" + name, nil, 0)
    }

    /// The wall clock, as the files' modification times count it (recency survives restarts).
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// A regular file's entry, checked whole: never blocking on a FIFO put in an entry's place,
    /// never through a link. Small files are read, large ones mapped; a large body is copied
    /// once, from the file into its memfd.
    private static func readEntry(_ path: String, maxBytes: Int) -> (
        key: String, info: CachedResponseInfo, body: ImageBody
    )? {
        guard let (fd, size) = Files.openRegular(path, maxBytes: maxBytes) else { return nil }
        defer { close(fd) }
        func entry(_ bytes: UnsafeRawBufferPointer) -> (key: String, info: CachedResponseInfo, body: ImageBody)? {
            guard let parsed = DiskEntry.parse(bytes) else { return nil }
            let body = ImageBody.copy(of: UnsafeRawBufferPointer(rebasing: bytes[parsed.body]))
            return (parsed.key, parsed.info, body)
        }
        guard size >= ImageBody.memfdThreshold else { return Files.readPrefix(fd, count: size)?.withUnsafeBytes(entry) }
        guard let map = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), map != MAP_FAILED else { return nil }
        defer { munmap(map, size) }
        return entry(UnsafeRawBufferPointer(start: map, count: size))
    }

    /// Stores an entry atomically, charged to `owner` (an app); false when it does not fit, when
    /// making room would take from apps within their fair share while `owner` is above its own,
    /// or when the disk refused. `prefetchStarted`: a prefetch's entry, which takes no room from
    /// entries used since that moment (`DiskIndex`) and goes first when room is needed.
    @discardableResult
    func write(
        key: String, info: CachedResponseInfo, body: any FetchedBody, owner: String = "", prefetchStarted: Double? = nil
    ) -> Bool {
        prepare()
        guard !broken else { return false }
        // A large body in a memfd goes to the file with O_DIRECT: its header is padded to a block.
        let direct = (body as? ImageBody).flatMap { $0.isMemfdBacked && $0.count >= Self.directFrom ? $0 : nil }
        let header = DiskEntry.header(
            key: key, owner: owner, info: info, bodyCount: body.count, alignBodyTo: direct == nil ? 0 : 4096)
        let size = UInt64(header.count + body.count + 8)
        let name = DiskEntry.fileName(for: key)
        // The older version of this entry (if any) is forgotten first, and goes if the new one
        // cannot be written: it is out of date.
        if index.contains(name) { journal.append((name, false)) }
        let room = index.makeRoom(for: name, size: size, owner: owner, prefetchStarted: prefetchStarted)
        forget(room.taken)
        guard room.fits else {
            drop(name)
            return false
        }
        let temporary = directory + "/tmp-" + name
        // Whatever is there (a crash's leftover, or a FIFO someone put in its place) goes; O_EXCL
        // then makes a new regular file or fails, and never opens something else that could block.
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600)
        // On any failure the older version of this entry goes too: it is out of date.
        guard fd >= 0 else { return failed("create", temporary, errno, dropping: name) }
        // In pieces: the kernel does not preempt a long write (PREEMPT_NONE); between pieces the
        // loop's thread takes the CPU the moment it wakes. The body's sum was taken as it arrived
        // (else it is read now), and a memfd body is copied in the kernel, never read here.
        let sum = DiskEntry.combine(
            header: header.withUnsafeBytes { DiskEntry.checksum($0) },
            body: body.knownChecksum ?? body.withUnsafeBytes { DiskEntry.checksum($0) })
        var error = header.withUnsafeBytes { Files.writeAll(fd, $0, piece: Self.writePiece) }
        if error == 0 {
            if let direct {
                error = direct.writeDirect(path: temporary, fd: fd, offset: header.count, piece: Self.writePiece)
            } else {
                error =
                    (body as? ImageBody)?.write(to: fd, piece: Self.writePiece)
                    ?? body.withUnsafeBytes { Files.writeAll(fd, $0, piece: Self.writePiece) }
            }
        }
        if error == 0 { error = DiskEntry.trailer(sum).withUnsafeBytes { Files.writeAll(fd, $0) } }
        if error == 0, close(fd) != 0 { error = errno } else if error != 0 { close(fd) }
        guard error == 0 else {
            unlink(temporary)
            return failed("write", temporary, error, dropping: name)
        }
        guard rename(temporary, directory + "/" + name) == 0 else {
            let error = errno
            unlink(temporary)
            return failed("rename", temporary, error, dropping: name)
        }
        index.insert(name, size: size, owner: owner, at: Self.now(), prefetched: prefetchStarted != nil)
        journal.append((name, true))
        if !lastError.isEmpty {
            logger.notice("Disk cache: writing again after: \(lastError)")
            lastError = ""
        }
        return true
    }

    func remove(key: String) {
        prepare()
        drop(DiskEntry.fileName(for: key))
    }

    /// Deletes every entry whose key and owner (as its file's header says: "" for an entry of
    /// the older format) `matches`; returns their keys. Reads each file's first bytes only.
    func removeImages(where matches: (_ key: String, _ owner: String) -> Bool) -> [String] {
        prepare()
        guard !broken else { return [] }
        var removed: [String] = []
        for name in index.names {
            let path = directory + "/" + name
            guard let (fd, size) = Files.openRegular(path, maxBytes: Int.max / 2) else { continue }
            let head = Files.readPrefix(fd, count: min(size, DiskEntry.headPrefix))
            close(fd)
            guard let found = head?.withUnsafeBytes({ DiskEntry.keyAndOwner($0) }), matches(found.key, found.owner)
            else { continue }
            drop(name)
            removed.append(found.key)
        }
        return removed
    }

    func setCapacity(_ bytes: UInt64) {
        forget(index.setCapacity(bytes))  // nothing to take before `prepare` has indexed the files
    }

    /// The bytes each app holds on disk ("" for entries from an earlier run).
    var usageByApp: [String: UInt64] {
        prepare()
        return index.usageByApp
    }

    /// Deletes the files of entries the index let go.
    private func forget(_ names: [String]) {
        for name in names {
            journal.append((name, false))
            unlink(directory + "/" + name)
        }
    }

    private func drop(_ name: String) {
        unindex(name)
        unlink(directory + "/" + name)
    }

    /// Forgets `name` (its file stays, for the caller to replace or delete).
    private func unindex(_ name: String) {
        if index.remove(name) { journal.append((name, false)) }
    }

    /// The last write error (e.g. "cannot write ...: No space left on device"), "" after a good
    /// write: the `DiskError` property.
    private(set) var lastError = ""

    private func failed(_ what: String, _ path: String, _ error: Int32, dropping name: String) -> Bool {
        let message = "cannot \(what) \(path): \(String(cString: strerror(error)))"
        unlink(directory + "/" + name)
        // Once per kind of failure, not once per image while the disk stays full.
        if message != lastError { logger.warning("Disk cache: \(message); the memory cache goes on") }
        lastError = message
        return false
    }
}
