import Glibc
import LinuxKit
import NetActivityCore
import Synchronization

/// An image's bytes, from the moment they arrive: a plain array while small, and from
/// `largeThreshold` on private memory of their own (`AnonymousMemory`: huge pages where it can),
/// written as the bytes come (from libcurl's buffer, a client's message, a disk entry) and made
/// read-only when complete. That memory is the bytes' final home: the cache keeps it, `LookupImage`
/// and the disk worker read it in place, and the first `OpenImage` turns it into a sealed memfd
/// (one copy, then the memfd's pages take the private ones' place at the same address), which
/// every later open shares. A large body is copied once on the loop while it arrives, never three
/// times; one an app never opens never pays for shared memory.
final class ImageBody: FetchedBody, @unchecked Sendable {
    // @unchecked: written (append, seal) by one thread before `seal()`; after it, immutable but
    // for `shared` (see `openReadOnly`), and read from any thread (the loop, the disk worker).

    /// Bodies from this size on have memory of their own (a mapping each would cost more for
    /// small ones).
    static let largeThreshold = 64 * 1024
    /// Memfds held by all shared bodies; past `maxMemfds` (`NetActivityLimits.memfdImages`) a
    /// body is not shared, and `OpenImage` copies it into a new memfd per call.
    static let memfds = Atomic<Int>(0)
    nonisolated(unsafe) static var maxMemfds = 4096  // set once at start-up, before any body

    private(set) var count = 0
    private var small: [UInt8] = []
    private var large: AnonymousMemory?
    /// The sealed memfd behind `large` once a client asked for an fd (the loop's, in `openReadOnly`).
    private var shared: Int32 = -1
    private var sealed = false
    /// The size the sender announced, if any: a large one gets its memory from the first byte.
    private let expected: Int
    /// False once the kernel refused a mapping: the body goes on as an array.
    private var largeAllowed = true

    init(expected: Int = 0) {
        self.expected = expected
    }

    /// A sealed body holding a copy of `data`.
    static func copy(of data: UnsafeRawBufferPointer) -> ImageBody {
        let body = ImageBody(expected: data.count)
        body.append(data)
        body.seal()
        return body
    }

    /// Frees large bodies: giving back megabytes of a memfd's pages (or of 4 KiB pages) takes the
    /// kernel a millisecond or more, and the cache may evict many at once. Not in the loop.
    static let reaper = SerialWorker(name: "netactivity-free", background: false)

    deinit {
        guard let large else { return }
        let shared = shared
        let free: @Sendable () -> Void = {
            large.release()
            if shared >= 0 {
                close(shared)
                ImageBody.memfds.subtract(1, ordering: .relaxed)
            }
        }
        if !Self.reaper.async(free) { free() }
    }

    /// Adds `data` at the end. A body whose mapping could not be had or grown (the memory or the
    /// map count ran out) goes on as an array, which still works.
    func append(_ data: UnsafeRawBufferPointer) {
        precondition(!sealed, "a sealed body is read-only")
        guard data.count > 0 else { return }
        let end = count + data.count
        if large == nil, largeAllowed, max(end, expected) >= Self.largeThreshold {
            if let made = AnonymousMemory(capacity: max(end, expected)) {
                small.withUnsafeBytes { if !$0.isEmpty { made.base.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
                (large, small) = (made, [])
            } else {
                largeAllowed = false
            }
        }
        // More than announced (or none was): the pages move to a larger mapping, no copy.
        if let memory = large, end > memory.capacity, !large!.grow(toAtLeast: end) { moveToArray() }
        guard let memory = large else {
            small.append(contentsOf: data.bindMemory(to: UInt8.self))
            count = end
            return
        }
        (memory.base + count).copyMemory(from: data.baseAddress!, byteCount: data.count)
        count = end
    }

    /// The bytes so far into an array, the mapping given back.
    private func moveToArray() {
        guard let memory = large else { return }
        small = Array(UnsafeRawBufferPointer(start: memory.base, count: count))
        large = nil
        largeAllowed = false
        memory.release()
    }

    /// Makes the body read-only for good. One announced as large that came small goes back to an
    /// array (a server may announce any length).
    func seal() {
        guard !sealed else { return }
        sealed = true
        guard large != nil else { return }
        if count < Self.largeThreshold { return moveToArray() }
        large!.seal(used: count)
    }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        precondition(sealed || large == nil, "a large body is read once sealed")
        if let large { return try body(UnsafeRawBufferPointer(start: large.base, count: count)) }
        return try small.withUnsafeBytes(body)
    }

    /// Whether an `OpenImage` shares this body's own memory (no copy per call).
    var isShared: Bool { shared >= 0 }

    /// A sealed memfd with the bytes, opened read-only for one client (its own file offset), for
    /// the caller to close. The first call on a large body makes its memfd (one copy) and puts it
    /// in place of the private memory; every later call reopens it. A small body, or one past the
    /// memfd cap, gets a new memfd per call. Called on the loop only.
    func openReadOnly() -> Int32? {
        precondition(sealed, "a body is shared once complete")
        if shared < 0, large != nil { share() }
        if shared >= 0 { return SealedMemory.reopenReadOnly(shared) }
        guard let fresh = withUnsafeBytes({ SealedMemory.make(name: "netactivity-image", bytes: $0) }) else { return nil }
        defer { close(fresh) }
        return SealedMemory.reopenReadOnly(fresh)
    }

    private func share() {
        guard let memory = large else { return }
        guard Self.memfds.wrappingAdd(1, ordering: .relaxed).newValue <= Self.maxMemfds,
              let fd = SealedMemory.make(name: "netactivity-image", bytes: UnsafeRawBufferPointer(start: memory.base, count: count))
        else {
            Self.memfds.subtract(1, ordering: .relaxed)
            return
        }
        // Held once: the memfd's pages take the private ones' place. Should the kernel refuse,
        // the memfd is still this body's (the bytes then held twice until it goes).
        _ = memory.replace(withReadOnlyFileAt: fd)
        shared = fd
    }
}
