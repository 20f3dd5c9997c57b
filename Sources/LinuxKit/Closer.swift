// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import Synchronization

/// Runs jobs that a client can make wait for ever (closing a descriptor of a file on FUSE sends the
/// file's server a FLUSH and waits for its answer; reading a process's files through its root
/// could meet the same), off the loop. Jobs run in order on one thread; a thread busy with one job
/// for longer than `stuckAfter` is left to it, and the next jobs go to a new thread (at most
/// `maxThreads`; past that they queue on the last one).
public final class StallTolerantWorker: Sendable {
    private final class Thread: Sendable {
        let worker: SerialWorker
        /// CLOCK_MONOTONIC nanoseconds when the running job started; 0 when idle.
        let busySince = Atomic<UInt64>(0)
        init(name: String) { worker = SerialWorker(name: name, background: false) }
    }

    private let name: String
    private let maxThreads: Int
    private let stuckAfter: UInt64
    private let threads = Mutex<(current: Thread?, made: Int)>((nil, 0))

    public init(name: String, maxThreads: Int, stuckAfterNanoseconds: UInt64) {
        self.name = name
        self.maxThreads = maxThreads
        stuckAfter = stuckAfterNanoseconds
    }

    /// Runs `job` on the current thread (a new one if it is stuck).
    public func run(_ job: @escaping @Sendable () -> Void) {
        let thread = pick()
        let ok = thread.worker.async {
            thread.busySince.store(max(1, EventLoop.now()), ordering: .relaxed)
            job()
            thread.busySince.store(0, ordering: .relaxed)
        }
        if !ok { job() }
    }

    private func pick() -> Thread {
        threads.withLock { state in
            if let current = state.current {
                let since = current.busySince.load(ordering: .relaxed)
                if since == 0 || EventLoop.now() &- since < stuckAfter || state.made >= maxThreads { return current }
            }
            state.made += 1
            let thread = Thread(name: name)
            state.current = thread
            return thread
        }
    }
}

/// Closes what clients handed us, off the loop (see `StallTolerantWorker`).
public enum Closer {
    public static let shared = StallTolerantWorker(
        name: "netactivity-close", maxThreads: 8, stuckAfterNanoseconds: 500_000_000)

    /// Closes `fd` on the closer's thread.
    public static func close(_ fd: Int32) {
        shared.run { _ = Glibc.close(fd) }
    }
}
