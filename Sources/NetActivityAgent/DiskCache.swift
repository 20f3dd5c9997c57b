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
/// Entries are small images, read and written on the agent's loop.
final class DiskCache {
    let directory: String
    private(set) var capacity: UInt64
    private let logger: Logger
    /// File name -> size, in recency order.
    private var index = LRUCache<String, UInt64>()
    /// Each file's app (entries from an earlier run belong to "", unknown), for fair eviction.
    private var owners = OwnerLedger<String>()
    private var ready = false
    private(set) var broken = false
    /// The directory's lock, held for the agent's life (closed with the process).
    private var lockFD: Int32 = -1

    static let defaultCapacity: UInt64 = 150 * 1024 * 1024

    init(directory: String, capacity: UInt64 = DiskCache.defaultCapacity, logger: Logger) {
        self.directory = directory
        self.capacity = capacity
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
        return index.totalCost
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
        chmod(directory, 0o700)
        // One writer per directory: a second agent of the same user (a second session) keeps its
        // images in memory, so the two never pass DiskCapacity together or delete each other's entries.
        // The lock is on the directory itself (flock works on a directory's fd): no extra file.
        lockFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
        guard lockFD >= 0 else {
            lastError = "cannot lock \(directory): \(String(cString: strerror(errno)))"
            logger.warning("Disk cache off: \(lastError)")
            broken = true
            return
        }
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
        var found: [(name: String, size: UInt64, time: Int)] = []
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
            found.append((name, UInt64(st.st_size), st.st_mtim.tv_sec))
        }
        for f in found.sorted(by: { $0.time < $1.time }) {
            index.set(f.size, cost: f.size, for: f.name)
            owners.note(f.name, cost: f.size, owner: "")
        }
        evict(toFit: 0)
    }

    /// The entry for `key`, refreshed as the most recently used; nil when absent or damaged
    /// (a damaged file is deleted).
    func read(key: String) -> DiskEntry? {
        prepare()
        let name = DiskEntry.fileName(for: key)
        guard !broken, index.value(for: name) != nil else { return nil }
        let path = directory + "/" + name
        guard let bytes = readWhole(path), let entry = DiskEntry.decode(bytes), entry.key == key else {
            logger.notice("Dropped a damaged disk cache entry \(name)")
            drop(name)
            return nil
        }
        owners.touch(name)
        utimensat(AT_FDCWD, path, nil, 0)  // recency for the next run
        return entry
    }

    /// Stores `entry` atomically, charged to `owner` (an app); false when it does not fit, when
    /// making room would take from apps within their fair share while `owner` is above its own,
    /// or when the disk refused.
    @discardableResult
    func write(_ entry: DiskEntry, owner: String = "") -> Bool {
        prepare()
        guard !broken else { return false }
        let bytes = entry.encode()
        let size = UInt64(bytes.count)
        let name = DiskEntry.fileName(for: entry.key)
        guard size <= capacity else {
            drop(name)
            return false
        }
        if let old = index.remove(name) { _ = old }
        owners.forget(name)
        guard evict(toFit: size, for: name, owner: owner) else {
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
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                let error = n == 0 ? ENOSPC : errno
                close(fd)
                unlink(temporary)
                return failed("write", temporary, error, dropping: name)
            }
            done += n
        }
        guard close(fd) == 0 else {
            let error = errno
            unlink(temporary)
            return failed("write", temporary, error, dropping: name)
        }
        guard rename(temporary, directory + "/" + name) == 0 else {
            let error = errno
            unlink(temporary)
            return failed("rename", temporary, error, dropping: name)
        }
        index.set(size, cost: size, for: name)
        owners.note(name, cost: size, owner: owner)
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

    func setCapacity(_ bytes: UInt64) {
        capacity = bytes
        if ready { evict(toFit: 0) }
    }

    /// The bytes each app holds on disk ("" for entries from an earlier run).
    var usageByApp: [String: UInt64] {
        prepare()
        return owners.usage
    }

    /// Makes room for `incoming` bytes of `name` (owned by `owner`): first from the apps above
    /// their fair share of the capacity (the incoming entry counted), LRU within the app, then
    /// plain LRU. Returns false, taking nothing more, when only `owner` itself is above its share
    /// and nothing of its own is left to take: one app's entries never push out the entries of
    /// apps within their share.
    @discardableResult
    private func evict(toFit incoming: UInt64, for name: String? = nil, owner: String = "") -> Bool {
        if let name { owners.note(name, cost: incoming, owner: owner) }
        defer { if let name { owners.forget(name) } }
        while index.totalCost + incoming > capacity {
            let fair = owners.victim(capacity: capacity, keeping: name)
            if let victim = fair.key {
                drop(victim)
                continue
            }
            if fair.someoneOver { return false }
            guard let oldest = index.removeOldest() else { return false }
            owners.forget(oldest.key)
            unlink(directory + "/" + oldest.key)
        }
        return true
    }

    private func drop(_ name: String) {
        index.remove(name)
        owners.forget(name)
        unlink(directory + "/" + name)
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

    /// A regular file's bytes, never blocking on a FIFO put in an entry's place, never through a link.
    private func readWhole(_ path: String) -> [UInt8]? {
        Files.readRegular(path, maxBytes: Int(capacity) + 1 << 20)
    }
}
