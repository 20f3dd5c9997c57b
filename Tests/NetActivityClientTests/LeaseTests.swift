import Glibc
@testable import NetActivityClient
import Testing

@Suite("ActivityLease")
struct LeaseTests {
    @Test("two threads ending one lease close its fd once: no descriptor of someone else's is ever closed")
    func endOnceFromTwoThreads() async {
        // Bystanders open pipes and check them while leases are ended from two threads at once:
        // a second close of a lease's number would hit a bystander's pipe that reused it.
        await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    for _ in 0..<3000 {
                        var fds: [Int32] = [-1, -1]
                        guard pipe(&fds) == 0 else { return false }
                        defer { close(fds[0]); close(fds[1]) }
                        for _ in 0..<3 where fcntl(fds[0], F_GETFD) < 0 || fcntl(fds[1], F_GETFD) < 0 { return false }
                    }
                    return true
                }
            }
            group.addTask {
                for _ in 0..<3000 {
                    var fds: [Int32] = [-1, -1]
                    guard pipe(&fds) == 0 else { return false }
                    close(fds[0])
                    let lease = ActivityLease(fd: fds[1])
                    async let a: Void = lease.end()
                    async let b: Void = lease.end()
                    _ = await (a, b)
                    if lease.isHeld { return false }
                }
                return true
            }
            for await ok in group { #expect(ok) }
        }
    }
}
