// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc

func closeFD(_ fd: Int32) -> Int32 { close(fd) }

/// Has glibc fill freed memory with `byte` (0: stop), through `mallopt(M_PERTURB, byte)`, which
/// Glibc's module map leaves out. A use after free then reads garbage rather than stale values.
func perturbFreedMemory(_ byte: Int32) {
    typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return }
    let M_PERTURB: Int32 = -6
    _ = unsafeBitCast(symbol, to: Mallopt.self)(M_PERTURB, byte)
}
