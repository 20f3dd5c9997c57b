// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import Logging
import NetActivityCore
import NetActivityTesting
import Testing

@testable import NetActivityAgent

/// The disk tier's files (`DiskCache`, what the disk worker runs): the entries it writes, how it
/// reads them back, what it does with damaged or planted files, and whose entries it removes.
@Suite("Disk cache")
struct DiskCacheTests {
    let root: String
    let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
    let info = CachedResponseInfo(etag: "\"v1\"", lastModified: nil, storedAt: 1_700_000_000, freshFor: 60)

    init() throws {
        var template = Array("/tmp/netactivity-disk-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SystemError("mkdtemp") }
        root = String(cString: made)
    }

    /// A cache in a directory of its own under `root` (made by the cache, as in a user's home).
    func cache(_ name: String = "cache", capacity: UInt64 = DiskCache.defaultCapacity) -> DiskCache {
        DiskCache(directory: root + "/" + name, capacity: capacity, logger: logger)
    }

    func path(_ cache: DiskCache, _ key: String) -> String { cache.directory + "/" + DiskEntry.fileName(for: key) }

    func mode(_ path: String) -> mode_t {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_mode : 0
    }

    func bytes(_ body: ImageBody) -> [UInt8] { body.withUnsafeBytes { Array($0) } }

    func cleanUp() {
        if let rm = try? ServiceProcess.spawn(["/bin/rm", "-rf", "--", root]) {
            var status: Int32 = 0
            waitpid(rm, &status, 0)
        }
    }

    @Test("an entry reads back as written, in a 0600 file named by the key's hash, in a 0700 directory")
    func roundTrip() throws {
        defer { cleanUp() }
        let disk = cache()
        let image = TestImages.png(width: 3, height: 3)
        #expect(disk.write(key: "https://example.com/a.png", info: info, body: image, owner: "app:a"))
        let hit = try #require(disk.read(key: "https://example.com/a.png"))
        #expect(hit.info == info)
        #expect(bytes(hit.body) == image)
        #expect(mode(disk.directory) & 0o7777 == 0o700)
        let file = path(disk, "https://example.com/a.png")
        #expect(mode(file) & 0o7777 == 0o600 && mode(file) & S_IFMT == S_IFREG)
        #expect(disk.usage > UInt64(image.count) && disk.count == 1)
        #expect(disk.read(key: "https://example.com/other.png") == nil)
    }

    @Test("a large body (a memfd, written with O_DIRECT) reads back whole")
    func largeBody() throws {
        defer { cleanUp() }
        let disk = cache()
        let image = TestImages.png(width: 8, height: 8, padding: 600 << 10)
        let body = ImageBody.copy(of: image.withUnsafeBytes { $0 })
        #expect(body.isMemfdBacked)
        #expect(disk.write(key: "k", info: info, body: body))
        #expect(try bytes(#require(disk.read(key: "k")).body) == image)
    }

    @Test("a damaged file is dropped and deleted, never served; so is a file whose header names another key")
    func damaged() throws {
        defer { cleanUp() }
        let disk = cache()
        let image = TestImages.png(width: 2, height: 2)
        disk.write(key: "k", info: info, body: image)
        let file = path(disk, "k")
        let fd = open(file, O_RDWR)
        var byte: UInt8 = 0
        pread(fd, &byte, 1, 40)
        byte ^= 0x10
        pwrite(fd, &byte, 1, 40)
        close(fd)
        #expect(disk.read(key: "k") == nil)
        #expect(access(file, F_OK) != 0, "the damaged file is gone")
        #expect(disk.count == 0)

        // A whole, valid entry of another key under k's name (a rename by someone else).
        disk.write(key: "other", info: info, body: image)
        disk.write(key: "k", info: info, body: image)
        #expect(rename(path(disk, "other"), path(disk, "k")) == 0)
        #expect(disk.read(key: "k") == nil, "the header's key must be the key asked for")
    }

    @Test("a FIFO or a link in an entry's place is dropped at once, never waited on or followed")
    func planted() throws {
        defer { cleanUp() }
        let disk = cache()
        let image = TestImages.png(width: 2, height: 2)
        disk.write(key: "fifo", info: info, body: image)
        disk.write(key: "link", info: info, body: image)
        unlink(path(disk, "fifo"))
        #expect(mkfifo(path(disk, "fifo"), 0o600) == 0)
        unlink(path(disk, "link"))
        disk.write(key: "target", info: info, body: image)
        #expect(symlink(path(disk, "target"), path(disk, "link")) == 0)
        #expect(disk.read(key: "fifo") == nil)
        #expect(disk.read(key: "link") == nil)
        #expect(disk.read(key: "target") != nil)
        // And a write through a FIFO left as the temporary file replaces it with a file.
        #expect(mkfifo(disk.directory + "/tmp-" + DiskEntry.fileName(for: "fifo"), 0o600) == 0)
        #expect(disk.write(key: "fifo", info: info, body: image))
        #expect(try bytes(#require(disk.read(key: "fifo")).body) == image)
    }

    @Test("each entry records its owner: RemoveImages takes one app's entries by prefix and leaves the rest")
    func owners() {
        defer { cleanUp() }
        let disk = cache()
        let image = TestImages.png(width: 2, height: 2)
        disk.write(key: "https://a.example/1.png", info: info, body: image, owner: "app:a")
        disk.write(key: "https://a.example/2.png", info: info, body: image, owner: "app:b")
        disk.write(key: "https://b.example/3.png", info: info, body: image, owner: "app:a")
        #expect(disk.usageByApp.keys.sorted() == ["app:a", "app:b"])
        let removed = disk.removeImages { key, owner in owner == "app:a" && key.hasPrefix("https://a.example/") }
        #expect(removed == ["https://a.example/1.png"])
        #expect(disk.read(key: "https://a.example/1.png") == nil)
        #expect(disk.read(key: "https://a.example/2.png") != nil, "another app's entry under the prefix stays")
        #expect(disk.read(key: "https://b.example/3.png") != nil, "the app's entry outside the prefix stays")
    }

    @Test("past its capacity the least recently used entries go, their files with them")
    func capacity() throws {
        defer { cleanUp() }
        let image = TestImages.png(width: 2, height: 2, padding: 10_000)
        let disk = cache(capacity: 3 * UInt64(image.count + 200))
        for key in ["k1", "k2", "k3"] { #expect(disk.write(key: key, info: info, body: image)) }
        _ = try #require(disk.read(key: "k1"))  // k2 is now the least recently used
        #expect(disk.write(key: "k4", info: info, body: image))
        #expect(disk.count == 3)
        #expect(access(path(disk, "k2"), F_OK) != 0)
        #expect(disk.read(key: "k1") != nil && disk.read(key: "k3") != nil && disk.read(key: "k4") != nil)
        disk.setCapacity(UInt64(image.count + 200))
        #expect(disk.count == 1)
        #expect(disk.read(key: "k4") != nil, "the most recently used stays")
    }

    @Test("one writer per directory: a second cache on it keeps nothing and says why")
    func oneWriter() {
        defer { cleanUp() }
        let first = cache()
        #expect(first.write(key: "k", info: info, body: TestImages.png(width: 1, height: 1)))
        let second = cache()
        #expect(second.count == 0)
        #expect(second.broken)
        #expect(second.lastError.contains("another netactivityd uses"))
        #expect(!second.write(key: "j", info: info, body: TestImages.png(width: 1, height: 1)))
        #expect(first.read(key: "k") != nil, "the first one's entries are untouched")
    }

    @Test("a symbolic link in the directory's place is not followed, and its target's mode is not changed")
    func directoryLink() {
        defer { cleanUp() }
        #expect(mkdir(root + "/elsewhere", 0o755) == 0)
        #expect(symlink(root + "/elsewhere", root + "/cache") == 0)
        let disk = cache()
        #expect(!disk.write(key: "k", info: info, body: TestImages.png(width: 1, height: 1)))
        #expect(disk.lastError.contains("not a directory of its own"))
        #expect(mode(root + "/elsewhere") & 0o7777 == 0o755)
    }
}
