// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import Testing

@testable import LinuxKit

@Suite("Quiet: a loop with nothing to do, and the memory it gives back")
struct IdleMemoryTests {
    static let smaps = """
        55d0a0000000-55d0a0100000 r--p 00000000 fe:01 123 /usr/bin/netactivityd
        Rss:                  200 kB
        Private_Dirty:           0 kB
        Anonymous:               0 kB
        VmFlags: rd mr mw me dw
        55d0a0100000-55d0a0800000 r-xp 00100000 fe:01 123 /usr/bin/netactivityd
        Rss:                 6000 kB
        Private_Dirty:           0 kB
        Anonymous:               0 kB
        VmFlags: rd ex mr mw me dw
        55d0a0800000-55d0a0900000 rw-p 00800000 fe:01 123 /usr/bin/netactivityd
        Rss:                  600 kB
        Private_Dirty:         600 kB
        Anonymous:             600 kB
        VmFlags: rd mr mw me dw
        7f0000000000-7f0000100000 r-xp 00028000 fe:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
        Rss:                 1000 kB
        Private_Dirty:           0 kB
        Anonymous:               0 kB
        VmFlags: rd ex mr mw me dw
        7f0000200000-7f0000201000 r-xp 00001000 fe:01 789 /opt/patched/libtextrel.so
        Rss:                    4 kB
        Private_Dirty:           4 kB
        Anonymous:               4 kB
        VmFlags: rd ex mr mw me dw
        7f0000300000-7f0000301000 r-xp 00000000 fe:01 790 /opt/with spaces/lib.so
        Rss:                    4 kB
        Private_Dirty:           0 kB
        Anonymous:               0 kB
        VmFlags: rd ex mr mw me dw
        7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
        Rss:                    8 kB
        Private_Dirty:           0 kB
        Anonymous:               0 kB
        VmFlags: rd ex mr mw me dw
        7ffd00010000-7ffd00011000 r-xp 00000000 00:00 0
        Rss:                    4 kB
        Private_Dirty:           0 kB
        Anonymous:               0 kB
        VmFlags: rd ex mr mw me dw
        7f0000400000-7f0000401000 r-xp 00000000 fe:01 791 /opt/cut/short.so
        Rss:                   4 kB
        """

    @Test(
        "only code from files with no private page is let go: never data, [vdso], code patched in place, or a block cut short"
    )
    func whichMappings() {
        #expect(
            IdleMemory.cleanCode(Self.smaps) == [
                0x55d0_a010_0000..<0x55d0_a080_0000, 0x7f00_0000_0000..<0x7f00_0010_0000,
                0x7f00_0030_0000..<0x7f00_0030_1000,
            ])
    }

    @Test("letting go of this very process's code: the code runs on, and maps back in")
    func ownProcess() {
        func square(_ x: Int) -> Int { x * x }
        #expect(IdleMemory.release() > 0)
        #expect(square(12) == 144)
        #expect(IdleMemory.cleanCode("").isEmpty)
    }

    @Test("the loop is told of quiet once after it starts and once after each spell of work, never while it idles")
    func quiet() {
        let loop = EventLoop()
        var told = 0
        loop.onQuiet(after: 20_000_000) { told += 1 }
        // The first turn with nothing to do ends in quiet.
        loop.runOnce(maxWaitNanoseconds: nil)
        #expect(told == 1)
        // Idle: the loop now sleeps without a timeout (a bounded turn passes and tells nothing).
        loop.runOnce(maxWaitNanoseconds: 30_000_000)
        #expect(told == 1)
        // Work (a timer), then quiet again.
        var fired = false
        loop.schedule(afterNanoseconds: 1_000_000) { fired = true }
        while !fired { loop.runOnce(maxWaitNanoseconds: nil) }
        #expect(told == 1)
        loop.runOnce(maxWaitNanoseconds: nil)
        #expect(told == 2)
        // A timer further away than the quiet: the quiet comes first.
        loop.schedule(afterNanoseconds: 10_000_000_000) {}
        loop.schedule(afterNanoseconds: 1_000_000) {}
        loop.runOnce(maxWaitNanoseconds: nil)
        loop.runOnce(maxWaitNanoseconds: nil)
        #expect(told == 3)
    }
}
