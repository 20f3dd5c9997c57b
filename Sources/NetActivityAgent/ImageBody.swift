// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import NetActivityCore
import Synchronization

/// An image's bytes, from the moment they arrive: a plain array while small, and from
/// `memfdThreshold` on a memfd that the bytes are written into as they come (from libcurl's
/// buffer, or a client's message) and that is sealed read-only when complete. That memfd is the
/// bytes' final home: the cache keeps it, `OpenImage` hands out read-only opens of it, and the
/// disk worker reads it in place. A large body is copied once on the loop, never three times.
final class ImageBody: FetchedBody, @unchecked Sendable {
    // @unchecked: written (append, seal) by one thread before `seal()`; after it, immutable and
    // read from any thread (the loop, the disk worker).

    /// Bodies from this size on are held in a memfd (an fd each would cost more for small ones).
    static let memfdThreshold = 64 * 1024
    /// Memfds held by all bodies (in flight, cached, waiting for the disk); past `maxMemfds`
    /// (`NetActivityLimits.memfdImages`) a body stays an array and `OpenImage` copies it.
    static let memfds = Atomic<Int>(0)
    nonisolated(unsafe) static var maxMemfds = 4096  // set once at start-up, before any body

    private(set) var count = 0
    /// `DiskEntry.checksum` of the bytes, taken as they are appended (they pass through the CPU
    /// then anyway, in cache), so the disk writer need not read them again; final once sealed.
    private var sum = DiskEntry.Checksum()
    private var sealedSum: UInt64?
    /// Whether to take `sum` (a body the disk tier will not keep need not pay for it).
    private let summing: Bool
    private var small: [UInt8] = []
    private var fd: Int32 = -1
    private var mapping: UnsafeRawPointer?
    private var sealed = false
    /// The size the sender announced, if any: a large one goes to a memfd from the first byte.
    private let expected: Int
    private var memfdAllowed: Bool

    init(expected: Int = 0, memfd: Bool = true, summing: Bool = true) {
        self.expected = expected
        memfdAllowed = memfd
        self.summing = summing
    }

    /// A sealed body holding a copy of `data`: a memfd when large, else (or when the kernel
    /// refuses one) an array.
    static func copy(of data: UnsafeRawBufferPointer) -> ImageBody {
        let body = ImageBody(expected: data.count)
        if body.append(data), body.seal() { return body }
        let plain = ImageBody(memfd: false)
        _ = plain.append(data)
        _ = plain.seal()
        return plain
    }

    /// A body made from `fd`, a client's memfd sealed against writing, shrinking and growing (so
    /// nobody can change it under us): its memory kept as it is (a read-only open of its own,
    /// mapped, no copy) when it is large and the memfd cap allows another, else copied into an
    /// array. Nil when it is not such a memfd, is empty, or is larger than `maxBytes`. The caller
    /// closes `fd` either way: the client's own open, whose offset and flags are the client's, is
    /// never kept nor handed to anyone.
    static func from(sealed fd: Int32, maxBytes: Int) -> ImageBody? {
        let required = SealedMemory.requiredForAdoption
        var st = stat()
        guard SealedMemory.seals(of: fd) & required == required, fstat(fd, &st) == 0, st.st_size > 0,
            st.st_size <= maxBytes
        else { return nil }
        let count = Int(st.st_size)
        // An fd each: only large images, and within the cap that keeps the agent's descriptors.
        if count >= memfdThreshold, memfds.wrappingAdd(1, ordering: .relaxed).newValue <= maxMemfds {
            if let own = SealedMemory.reopenReadOnly(fd) {
                if let map = mmap(nil, count, PROT_READ, MAP_SHARED, own, 0), map != MAP_FAILED {
                    let body = ImageBody(memfd: false)
                    body.count = count
                    body.sealed = true
                    body.fd = own
                    body.mapping = UnsafeRawPointer(map)
                    return body
                }
                close(own)
            }
        }
        if count >= memfdThreshold { memfds.subtract(1, ordering: .relaxed) }
        guard let map = mmap(nil, count, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { return nil }
        defer { munmap(map, count) }
        let body = ImageBody(memfd: false)
        guard body.append(UnsafeRawBufferPointer(start: map, count: count)), body.seal() else { return nil }
        return body
    }

    /// Frees large bodies: unmapping and closing a memfd of megabytes gives its pages back in
    /// the kernel, a millisecond or more, and the cache may evict many at once. Not in the loop.
    static let reaper = SerialWorker(name: "netactivity-free", background: false)

    deinit {
        guard fd >= 0 else { return }
        let (fd, count) = (fd, count)
        let mapping = mapping.map { UInt(bitPattern: $0) }
        let free: @Sendable () -> Void = {
            if let mapping { munmap(UnsafeMutableRawPointer(bitPattern: mapping), count) }
            close(fd)
            ImageBody.memfds.subtract(1, ordering: .relaxed)
        }
        if !Self.reaper.async(free) { free() }
    }

    /// Small pieces bound for the memfd, written together: a server that sends its body a byte at a
    /// time would otherwise cost a system call per byte.
    private var staged: [UInt8] = []
    static let stageBelow = 16 * 1024
    static let stageFlush = 64 * 1024

    /// Adds `data` at the end; false when the memory could not be had (a full tmpfs, no memory).
    func append(_ data: UnsafeRawBufferPointer) -> Bool {
        precondition(!sealed, "a sealed body is read-only")
        guard data.count > 0 else { return true }
        if summing { sum.add(data) }
        return store(data)
    }

    /// Keeps `data` (already summed) at the end.
    private func store(_ data: UnsafeRawBufferPointer) -> Bool {
        if fd < 0, memfdAllowed, max(count + data.count, expected) >= Self.memfdThreshold { moveToMemfd() }
        guard fd >= 0 else {
            small.append(contentsOf: data.bindMemory(to: UInt8.self))
            count += data.count
            return true
        }
        if data.count < Self.stageBelow {
            staged.append(contentsOf: data.bindMemory(to: UInt8.self))
            count += data.count
            return staged.count < Self.stageFlush || flushStaged()
        }
        guard flushStaged() else { return false }
        return write(data)
    }

    /// Writes what is staged into the memfd; false when the memory could not be had.
    private func flushStaged() -> Bool {
        guard !staged.isEmpty, fd >= 0 else { return true }
        let pending = staged
        staged = []
        count -= pending.count
        return pending.withUnsafeBytes { write($0) }
    }

    /// `data` written into the memfd at the end (or, when the memfd takes no more, the body moved
    /// to an array with it).
    private func write(_ data: UnsafeRawBufferPointer) -> Bool {
        var done = 0
        while done < data.count {
            let n = pwrite(fd, data.baseAddress! + done, data.count - done, off_t(count + done))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                // The memfd took no more (a file size limit applies to it too, as does the
                // memory cgroup): the body goes on as an array, from what the memfd took.
                count += done
                guard moveToArray() else { return false }
                return store(UnsafeRawBufferPointer(rebasing: data[done...]))
            }
            done += n
        }
        count += data.count
        return true
    }

    /// Reads what the memfd holds back into an array and lets the memfd go; false when it could not.
    private func moveToArray() -> Bool {
        guard let bytes = Files.readPrefix(fd, count: count) else { return false }
        close(fd)
        fd = -1
        Self.memfds.subtract(1, ordering: .relaxed)
        small = bytes
        memfdAllowed = false
        return true
    }

    /// A memfd for this body if the cap allows and the kernel gives one, with what came so far;
    /// else the body stays an array (it still works; `OpenImage` copies it).
    private func moveToMemfd() {
        guard Self.memfds.wrappingAdd(1, ordering: .relaxed).newValue <= Self.maxMemfds,
            let made = SealedMemory.makeEmpty(name: "netactivity-image")
        else {
            Self.memfds.subtract(1, ordering: .relaxed)
            return
        }
        let moved = small.withUnsafeBytes { bytes in
            bytes.isEmpty || pwrite(made, bytes.baseAddress!, bytes.count, 0) == bytes.count
        }
        guard moved else {
            close(made)
            Self.memfds.subtract(1, ordering: .relaxed)
            return
        }
        fd = made
        small = []
    }

    /// Makes the body read-only for good (the memfd sealed, then mapped read-only); false when
    /// the kernel refused, and the body must not be used.
    func seal() -> Bool {
        guard !sealed else { return true }
        guard flushStaged() else { return false }
        sealed = true
        if summing { sealedSum = sum.finish() }
        guard fd >= 0 else { return true }
        // The writable open goes: what is kept and mapped is a read-only open made here, before
        // anyone else holds the memory.
        guard SealedMemory.sealReadOnly(fd), count > 0, let own = SealedMemory.reopenReadOnly(fd) else { return false }
        close(fd)
        fd = own
        guard let map = mmap(nil, count, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { return false }
        mapping = UnsafeRawPointer(map)
        return true
    }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        precondition(sealed || fd < 0, "a memfd body is read once sealed")
        if let mapping { return try body(UnsafeRawBufferPointer(start: mapping, count: count)) }
        return try small.withUnsafeBytes(body)
    }

    var isMemfdBacked: Bool { fd >= 0 }

    /// The largest O_DIRECT request `writeDirect` makes.
    static let directPiece = 1 << 20

    /// Writes the bytes into the file at `path`, open as `out` with its position at `offset`:
    /// a memfd's whole 4 KiB blocks with O_DIRECT from its mapping, when `offset` is on a block
    /// (the page cache neither copies nor keeps them: a third of the CPU of a buffered write, and
    /// the user's cached files are not pushed out by images), the rest through `out`. Where the
    /// file system takes no O_DIRECT, all of it as `write(to:piece:)`. 0, or the errno.
    func writeDirect(path: String, fd out: Int32, offset: Int, piece: Int) -> Int32 {
        precondition(sealed)
        let block = 4096
        let whole = count / block * block
        guard fd >= 0, let mapping, whole > 0, offset % block == 0, let direct = Files.openDirect(path) else {
            return write(to: out, piece: piece)
        }
        defer { close(direct) }
        var done = 0
        while done < whole {
            // Requests of 1 MiB: each costs the block device a notification (a VM exit on this VM;
            // 128 KiB ones cost 1 ms more per 4 MiB image), and each is a stretch the kernel does
            // not preempt (pinning its pages), so not the whole image in one.
            let n = pwrite(direct, mapping + done, min(whole - done, Self.directPiece), off_t(offset + done))
            if n < 0, errno == EINTR { continue }
            if n < 0, done == 0, errno == EINVAL { return write(to: out, piece: piece) }  // refused after all
            guard n > 0 else { return n == 0 ? ENOSPC : errno }
            done += n
            if n % block != 0 { break }  // off the block grid: the rest goes through `out`
        }
        guard lseek(out, off_t(offset + done), SEEK_SET) >= 0 else { return errno }
        return Files.writeAll(out, UnsafeRawBufferPointer(start: mapping + done, count: count - done), piece: piece)
    }

    /// Nil for a client's memfd adopted as it is (its bytes were never read).
    var knownChecksum: UInt64? { sealedSum }

    /// Writes the bytes to `out` at its position: a memfd's in the kernel (`Files.copy`, no trip
    /// through this process), `piece` bytes per call; an array's with write(2). 0, or the errno.
    func write(to out: Int32, piece: Int) -> Int32 {
        precondition(sealed)
        if fd >= 0 { return Files.copy(from: fd, count: count, to: out, piece: piece) }
        return small.withUnsafeBytes { Files.writeAll(out, $0, piece: piece) }
    }

    /// A sealed memfd with the bytes for one client (its own file offset), for the caller to
    /// close: this body's memfd opened read-only again (no copy; `SealedMemory.openForClient`: what
    /// a holder does to the file's mode changes nothing for the next client), else a new memfd of
    /// its own, whose seals forbid any change.
    func openReadOnly() -> Int32? {
        if fd >= 0 { return SealedMemory.openForClient(fd, count: count) }
        return small.withUnsafeBytes { SealedMemory.make(name: "netactivity-image", bytes: $0) }
    }
}

extension FetchedBody {
    /// The bytes as a sealed memfd for one reader (a client, a decoder), for the caller to close:
    /// a cache body's own memory opened read-only again, else a new sealed memfd of its own.
    func sealedReadOnly() -> Int32? {
        if let body = self as? ImageBody { return body.openReadOnly() }
        return withUnsafeBytes { SealedMemory.make(name: "netactivity-image", bytes: $0) }
    }
}
