// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import NetActivityClient
import Synchronization
import Testing

@Suite("NetActivityLease", .timeLimit(.minutes(1)))
struct LeaseTests {
    @Test("two threads ending one lease close its fd once: no descriptor of someone else's is ever closed")
    func endOnceFromTwoThreads() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let activity = await NetActivity.connect(address: bus.address)
        // Bystanders (on threads of their own: spinning ones in Swift's pool would starve it) open pipes and check them while
        // leases are ended from two threads at once (some before the agent's fd has arrived,
        // some after): a second close of a lease's number would hit a bystander's pipe that
        // reused it.
        let bystanders = Bystanders(count: 2)
        for i in 0..<300 {
            let lease = try await activity.beginActivity(reason: "")
            if i % 2 == 0 { await activity.settled() }  // the agent's fd is held by now
            async let a: Void = Task.detached { lease.end() }.value
            async let b: Void = Task.detached { lease.end() }.value
            _ = await (a, b)
        }
        await activity.settled()
        #expect(bystanders.stop() == 0, "a bystander's pipe was closed under it")
        #expect(
            try await bus.eventually(within: 5) { try bus.status().activityCount == 0 },
            "every lease ended at the agent")
        activity.close()
    }
}

/// Threads that open pipes and check them until stopped, counting pipes found closed under them.
private final class Bystanders: Sendable {
    private let stopping = Atomic(false)
    private let broken = Atomic(0)
    private let started = Mutex<[pthread_t]>([])

    init(count: Int) {
        for _ in 0..<count { start() }
    }

    private final class Box {
        let owner: Bystanders
        init(_ owner: Bystanders) { self.owner = owner }
    }

    private func start() {
        var thread = pthread_t()
        let box = Unmanaged.passRetained(Box(self)).toOpaque()
        pthread_create(
            &thread, nil,
            { raw in
                Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().owner.run()
                return nil
            }, box)
        started.withLock { $0.append(thread) }
    }

    private func run() {
        while !stopping.load(ordering: .relaxed) {
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else { continue }
            for _ in 0..<3 where fcntl(fds[0], F_GETFD) < 0 || fcntl(fds[1], F_GETFD) < 0 {
                broken.add(1, ordering: .relaxed)
                break
            }
            close(fds[0])
            close(fds[1])
        }
    }

    /// Stops and joins the threads; how many pipes were found closed.
    func stop() -> Int {
        stopping.store(true, ordering: .relaxed)
        for thread in started.withLock({ $0 }) { pthread_join(thread, nil) }
        return broken.load(ordering: .relaxed)
    }
}
