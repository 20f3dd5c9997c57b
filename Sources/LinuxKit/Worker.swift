// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CLinux
import DequeModule
import Glibc

/// One background thread that runs jobs in the order they were given (the agent's disk work:
/// file writes, reads and checksums, kept off the event loop). The thread starts with the first
/// job and then sleeps on a condition variable while there is nothing to do: an idle worker
/// costs no CPU and no wake-ups. A background worker runs at nice 19: on a busy CPU the loop's
/// thread gets about 98 % of it (jobs that are long do their work in pieces, each ending in user
/// space, where the loop takes the CPU back). Not SCHED_IDLE: a thread of that class makes no
/// progress at all while anything else runs, and the loop would wait behind it for any lock it
/// holds (malloc's, the mailbox's); an agent that did not exit within 5 s in a test run next to a
/// compile pointed at it. Jobs report back through the loop's mailbox.
public final class SerialWorker: @unchecked Sendable {
    // @unchecked: every stored property but `name` and `background` is guarded by `lock`.
    private let name: String
    private let background: Bool
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private let idle = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var jobs: Deque<@Sendable () -> Void> = []
    private var running = false
    private var started = false
    private var failed = false

    /// `background`: at nice 19 (else the creating thread's priority).
    public init(name: String, background: Bool = true) {
        self.name = name
        self.background = background
        pthread_mutex_init(lock, nil)
        pthread_cond_init(wake, nil)
        _ = clinux_cond_init_monotonic(idle)
    }

    // The thread holds the worker (it is never stopped), so deinit runs only if it never started.
    deinit {
        pthread_cond_destroy(idle)
        pthread_cond_destroy(wake)
        pthread_mutex_destroy(lock)
        idle.deallocate()
        wake.deallocate()
        lock.deallocate()
    }

    /// Jobs given and not yet finished.
    public var pending: Int {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        return jobs.count + (running ? 1 : 0)
    }

    /// Queues `job`; false (and the job dropped) when the thread could not be started.
    @discardableResult
    public func async(_ job: @escaping @Sendable () -> Void) -> Bool {
        pthread_mutex_lock(lock)
        if !started {
            started = true
            failed = !startThread()
        }
        guard !failed else {
            pthread_mutex_unlock(lock)
            return false
        }
        jobs.append(job)
        pthread_cond_signal(wake)
        pthread_mutex_unlock(lock)
        return true
    }

    /// Waits until every job given so far has run, or `milliseconds` passed; true when all ran.
    /// (For a clean shutdown; the loop never waits on the worker otherwise.)
    public func waitUntilIdle(milliseconds: Int) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let ns = Int(deadline.tv_nsec) + (milliseconds % 1000) * 1_000_000
        deadline.tv_sec += milliseconds / 1000 + ns / 1_000_000_000
        deadline.tv_nsec = ns % 1_000_000_000
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        while !jobs.isEmpty || running {
            if pthread_cond_timedwait(idle, lock, &deadline) == ETIMEDOUT { return false }
        }
        return true
    }

    private func startThread() -> Bool {
        var thread = pthread_t()
        let me = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(
            &thread, nil,
            { raw in
                let worker = Unmanaged<SerialWorker>.fromOpaque(raw!).takeRetainedValue()
                worker.serve()
                return nil
            }, me)
        if rc != 0 {
            Unmanaged<SerialWorker>.fromOpaque(me).release()
            return false
        }
        pthread_detach(thread)
        return true
    }

    private func serve() -> Never {
        setCurrentThreadName(name)
        var all = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_BLOCK, &all, nil)  // signals are the loop's (its signalfd)
        if background { _ = clinux_set_thread_nice(19) }
        pthread_mutex_lock(lock)
        while true {
            while jobs.isEmpty {
                jobs = []  // what a burst of jobs took goes back
                pthread_cond_broadcast(idle)
                pthread_cond_wait(wake, lock)
            }
            let job = jobs.removeFirst()
            running = true
            pthread_mutex_unlock(lock)
            job()
            pthread_mutex_lock(lock)
            running = false
        }
    }
}
