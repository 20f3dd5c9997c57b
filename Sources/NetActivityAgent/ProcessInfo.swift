import Glibc

/// Reads `/proc/<pid>/comm`, the kernel's short process name, or "" when it cannot.
func processName(pid: UInt32) -> String {
    let fd = open("/proc/\(pid)/comm", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var buf = [UInt8](repeating: 0, count: 64)
    let n = read(fd, &buf, buf.count)
    guard n > 0 else { return "" }
    var bytes = buf[0..<n]
    while bytes.last == 10 { bytes = bytes.dropLast() }
    return String(decoding: bytes, as: UTF8.self)
}
