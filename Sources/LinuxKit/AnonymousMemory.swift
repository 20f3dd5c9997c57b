internal import CLinux
import Glibc

/// Private memory for a large buffer filled as bytes arrive, then read-only: its own mapping,
/// aligned to 2 MiB and advised for transparent huge pages from that size on. Fresh memory is
/// what a large buffer costs most: measured on this VM (one CPU), filling a new 4 MiB memfd with
/// 64 KiB writes takes 1.2 to 1.9 ms and giving its 4 KiB pages back another 0.6 ms; this memory,
/// two huge pages, fills in about 0.2 ms and goes back in 0.02 ms (`shmem_enabled` is `never`
/// here, as on Debian, so no memfd gets huge pages). With huge pages off it is 4 KiB pages, as
/// cheap as a memfd's or cheaper.
///
/// A plain value: its owner calls `release()` exactly once. Written by one thread until `seal`;
/// after it, read from any.
public struct AnonymousMemory: @unchecked Sendable {
    public private(set) var base: UnsafeMutableRawPointer
    public private(set) var capacity: Int

    static let hugePage = 2 << 20
    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    static func pages(_ n: Int) -> Int { (n + pageSize - 1) / pageSize * pageSize }

    /// At least `capacity` bytes of zeroed, writable memory (untouched until written); nil with
    /// errno set.
    public init?(capacity: Int) {
        let cap = Self.pages(max(capacity, 1))
        guard cap >= Self.hugePage else {
            guard let p = mmap(nil, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), p != MAP_FAILED
            else { return nil }
            (base, self.capacity) = (p, cap)
            return
        }
        // The kernel aligns only mappings whose length is a multiple of 2 MiB: reserve one huge
        // page more and give back what lies before and after the aligned start.
        let reserved = cap + Self.hugePage
        guard let raw = mmap(nil, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), raw != MAP_FAILED
        else { return nil }
        let mask = UInt(Self.hugePage - 1)
        let start = (UInt(bitPattern: raw) + mask) & ~mask
        let head = Int(start - UInt(bitPattern: raw))
        if head > 0 { munmap(raw, head) }
        if reserved - head - cap > 0 { munmap(raw + head + cap, reserved - head - cap) }
        (base, self.capacity) = (raw + head, cap)
        _ = clinux_advise_huge_pages(base, cap)
    }

    /// Room for at least `needed` bytes (at least double what there was), keeping the contents:
    /// the pages move, nothing is copied, and `base` may change. False with errno set, the memory
    /// as it was.
    public mutating func grow(toAtLeast needed: Int) -> Bool {
        let cap = Self.pages(max(needed, capacity * 2))
        guard cap > capacity else { return true }
        guard let moved = clinux_mremap_grow(base, capacity, cap), moved != MAP_FAILED else { return false }
        (base, capacity) = (moved, cap)
        if cap >= Self.hugePage { _ = clinux_advise_huge_pages(base, cap) }
        return true
    }

    /// Gives back the pages past the first `used` bytes (`used` > 0) and makes the rest
    /// read-only for good.
    public mutating func seal(used: Int) {
        precondition(used > 0 && used <= capacity)
        let keep = Self.pages(used)
        if keep < capacity {
            munmap(base + keep, capacity - keep)
            capacity = keep
        }
        mprotect(base, capacity, PROT_READ)
    }

    /// Puts the file behind `fd` (a memfd holding these same bytes) in place of this memory, at
    /// the same address and read-only, so that the bytes are held once: a reader on another
    /// thread sees the same bytes at every moment (the kernel swaps the pages under its mapping
    /// lock, and a reader that faults meanwhile waits for it). The file must reach into the last
    /// page. False with errno set when the kernel refused: the memory is then as it was, or, where
    /// the kernel failed after taking the old pages away (since Linux 6.12 that leaves a gap), the
    /// same bytes read back from the file into fresh memory at the same address.
    public func replace(withReadOnlyFileAt fd: Int32) -> Bool {
        if let p = mmap(base, capacity, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0), p == base { return true }
        let saved = errno
        defer { errno = saved }
        guard msync(base, capacity, MS_ASYNC) != 0, errno == ENOMEM else { return false }  // still mapped
        guard let p = mmap(base, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
              p == base
        else { return false }
        var done = 0
        while done < capacity {
            let n = pread(fd, base + done, capacity - done, off_t(done))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }  // the file's end, inside the last page
            done += n
        }
        mprotect(base, capacity, PROT_READ)
        return false
    }

    /// Unmaps it. Giving back megabytes of 4 KiB pages takes the kernel a millisecond or more:
    /// large owners do it off the loop.
    public func release() {
        munmap(base, capacity)
    }
}
