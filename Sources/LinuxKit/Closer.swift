import Glibc
import Synchronization

/// Closes what clients handed us, off the loop: closing a descriptor of a file on FUSE sends the
/// file's server a FLUSH and waits for its answer, which a hostile server never gives. Jobs run
/// on one thread; a thread busy with one job for longer than `stuckAfter` is left to it, and the
/// next jobs go to a new thread (at most `maxThreads`; past that they queue on the last one).
public final class Closer: Sendable {
    private final class Thread: Sendable {
        let worker: SerialWorker
        /// CLOCK_MONOTONIC nanoseconds when the running job started; 0 when idle.
        let busySince = Atomic<UInt64>(0)
        init(name: String) { worker = SerialWorker(name: name, background: false) }
    }

    public static let shared = Closer()
    static let maxThreads = 8
    static let stuckAfter: UInt64 = 500_000_000
    private let threads = Mutex<(current: Thread?, made: Int)>((nil, 0))

    /// Runs `job` (which closes or releases something a client gave us) on the closer's thread.
    public func run(_ job: @escaping @Sendable () -> Void) {
        let thread = pick()
        let ok = thread.worker.async {
            thread.busySince.store(max(1, EventLoop.now()), ordering: .relaxed)
            job()
            thread.busySince.store(0, ordering: .relaxed)
        }
        if !ok { job() }
    }

    /// Closes `fd` on the closer's thread.
    public func close(_ fd: Int32) {
        run { _ = Glibc.close(fd) }
    }

    private func pick() -> Thread {
        threads.withLock { state in
            if let current = state.current {
                let since = current.busySince.load(ordering: .relaxed)
                if since == 0 || EventLoop.now() &- since < Self.stuckAfter || state.made >= Self.maxThreads { return current }
            }
            state.made += 1
            let thread = Thread(name: "netactivity-close")
            state.current = thread
            return thread
        }
    }
}
