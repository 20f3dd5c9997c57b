// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CLinux
import Glibc

/// What a process that has nothing to do can give back without losing anything: the mappings of
/// code, its own and its libraries', and malloc's free pages.
///
/// Code is mapped from its files: clean pages, in the page cache, that the kernel maps into the
/// process as it runs them, with the pages around each one (fault-around, or a whole large
/// folio), so RSS counts megabytes of code that ran once, at start-up, or last minute.
/// `MADV_DONTNEED` on a file's read-and-execute mapping takes those page-table entries away and
/// nothing else: the pages stay in the page cache (shared with whoever else maps them), and what
/// runs next maps back in, a minor fault for each piece (no I/O while the cache keeps them; under
/// memory pressure, pages no process maps are the kernel's to reclaim first). Only mappings with
/// no private page of their own are touched (smaps: no Private_Dirty, no Anonymous), so code a
/// debugger patched or a library relocated in place is never thrown away; no writable mapping is.
public enum IdleMemory {
    /// Lets go of the code's mappings and of malloc's free pages; returns the bytes of code.
    @discardableResult
    public static func release() -> Int {
        _ = malloc_trim(0)
        let fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        let smaps = Files.readToEnd(fd, limit: 64 << 20)
        close(fd)
        guard let smaps else { return 0 }
        var released = 0
        for range in cleanCode(String(decoding: smaps, as: UTF8.self)) {
            if madvise(UnsafeMutableRawPointer(bitPattern: range.lowerBound), range.count, MADV_DONTNEED) == 0 {
                released += range.count
            }
        }
        return released
    }

    /// The `r-xp` mappings of files (a path, not `[vdso]`) with no private page, from the text of
    /// /proc/PID/smaps. A mapping counts once its block is whole (its last line, VmFlags, read), so
    /// a read cut short never passes one whose private pages were not told yet.
    static func cleanCode(_ smaps: String) -> [Range<UInt>] {
        var out: [Range<UInt>] = []
        var candidate: Range<UInt>?
        var clean = true
        var whole = false
        func close() {
            if let c = candidate, clean, whole { out.append(c) }
            candidate = nil
        }
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            if let range = fields.first, range.contains("-"), fields.count >= 5, !range.hasSuffix(":") {
                // A mapping's header: start-end perms offset dev inode [path]
                close()
                clean = true
                whole = false
                let path = fields.count == 6 ? fields[5].drop(while: { $0 == " " }) : ""
                let bounds = range.split(separator: "-")
                guard fields[1] == "r-xp", path.hasPrefix("/"), bounds.count == 2,
                    let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16), start < end
                else { continue }
                candidate = start..<end
            } else if candidate != nil, fields.count >= 2,
                fields[0] == "Private_Dirty:" || fields[0] == "Anonymous:", fields[1] != "0"
            {
                clean = false
            } else if fields.first == "VmFlags:" {
                whole = true
            }
        }
        close()
        return out
    }
}
