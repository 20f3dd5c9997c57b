import Glibc
import LinuxKit
import Synchronization
import Testing

/// The large image bodies' memory: grown without losing bytes, aligned for huge pages, trimmed
/// and read-only once complete, and swapped for a memfd under a reader without a wrong byte.
@Suite("Anonymous memory")
struct AnonymousMemoryTests {
    static func fill(_ base: UnsafeMutableRawPointer, from start: Int, to end: Int) {
        for i in start..<end { base.storeBytes(of: UInt8(truncatingIfNeeded: i &* 31 &+ i >> 12), toByteOffset: i, as: UInt8.self) }
    }

    static func holds(_ base: UnsafeRawPointer, count: Int) -> Bool {
        (0..<count).allSatisfy { base.load(fromByteOffset: $0, as: UInt8.self) == UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 12) }
    }

    /// The permissions and path of the mapping that holds `address`, from /proc/self/maps.
    static func mapping(of address: UnsafeRawPointer) -> (start: UInt, end: UInt, perms: String, path: String)? {
        let fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = [], chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            guard n > 0 else { break }
            bytes += chunk[..<n]
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let a = UInt(bitPattern: address)
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            let range = fields[0].split(separator: "-").compactMap { UInt($0, radix: 16) }
            guard range.count == 2, range[0] <= a, a < range[1] else { continue }
            return (range[0], range[1], String(fields[1]), fields.count > 5 ? fields[5...].joined(separator: " ") : "")
        }
        return nil
    }

    @Test("growing moves the pages and keeps every byte; sealing trims to whole pages, read-only")
    func growAndSeal() throws {
        var memory = try #require(AnonymousMemory(capacity: 100_000))
        Self.fill(memory.base, from: 0, to: 100_000)
        let grew = memory.grow(toAtLeast: 100_001)
        #expect(grew)
        #expect(memory.capacity >= 200_000, "at least doubled: no remap per chunk")
        let grewAgain = memory.grow(toAtLeast: 5_000_000)
        #expect(grewAgain)
        Self.fill(memory.base, from: 100_000, to: 5_000_000)
        #expect(Self.holds(memory.base, count: 5_000_000))
        memory.seal(used: 4_200_001)
        #expect(memory.capacity == 4_202_496, "4,200,001 bytes in 1,026 pages")
        let mapped = try #require(Self.mapping(of: memory.base))
        #expect(mapped.perms.hasPrefix("r--p"))
        #expect(Self.holds(memory.base, count: 4_200_001))
        memory.release()
    }

    @Test("from 2 MiB on the memory starts on a huge-page boundary")
    func aligned() throws {
        let memory = try #require(AnonymousMemory(capacity: 4 << 20 + 12_345))
        #expect(UInt(bitPattern: memory.base) % UInt(2 << 20) == 0)
        let mapped = try #require(Self.mapping(of: memory.base))
        #expect(mapped.start == UInt(bitPattern: memory.base), "what was reserved before the boundary is given back")
        memory.release()
    }

    @Test("a memfd takes the memory's place at the same address while another thread reads it")
    func replaceUnderAReader() async throws {
        let count = 3 << 20 + 777
        var memory = try #require(AnonymousMemory(capacity: count))
        Self.fill(memory.base, from: 0, to: count)
        memory.seal(used: count)
        let fd = try #require(SealedMemory.make(name: "anonymous-memory-test", bytes: UnsafeRawBufferPointer(start: memory.base, count: count)))
        defer { close(fd) }

        // A reader sums the bytes over and over, as the disk worker checksums a body being shared.
        let expected = (0..<count).reduce(0) { $0 &+ Int(memory.base.load(fromByteOffset: $1, as: UInt8.self)) }
        final class Progress: Sendable {
            let stop = Atomic<Bool>(false), passes = Atomic<Int>(0), wrong = Atomic<Int>(0)
        }
        let progress = Progress()
        let base = UInt(bitPattern: memory.base)
        let reader = SerialWorker(name: "reader", background: false)
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            _ = reader.async {
                let p = UnsafeRawPointer(bitPattern: base)!
                while !progress.stop.load(ordering: .relaxed) || progress.passes.load(ordering: .relaxed) < 2 {
                    var sum = 0
                    for i in stride(from: 0, to: count, by: 1) { sum &+= Int(p.load(fromByteOffset: i, as: UInt8.self)) }
                    if sum != expected { progress.wrong.add(1, ordering: .relaxed) }
                    progress.passes.add(1, ordering: .relaxed)
                }
                done.resume()
            }
            while progress.passes.load(ordering: .relaxed) < 1 { sched_yield() }  // the reader is under way
            #expect(memory.replace(withReadOnlyFileAt: fd))
            progress.stop.store(true, ordering: .relaxed)
        }
        #expect(progress.wrong.load(ordering: .relaxed) == 0)
        let mapped = try #require(Self.mapping(of: memory.base))
        #expect(mapped.path.contains("memfd:anonymous-memory-test"))
        #expect(mapped.perms.hasPrefix("r--s"))
        #expect(Self.holds(memory.base, count: count))
        memory.release()
    }
}
