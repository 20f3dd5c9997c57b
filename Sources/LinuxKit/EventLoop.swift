// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CLinux
import Glibc

/// A single-threaded event loop on epoll: file-descriptor handlers and one-shot timers.
///
/// Each registration carries a token of its own in `epoll_data.u64` (as SwiftNIO's selector does),
/// never the fd number: when a handler closes an fd whose event is still waiting in the same batch
/// and the number is reused at once (a new lease, a new connection), the old event finds no
/// registration with its token and is dropped instead of reaching the newcomer.
///
/// It sleeps in `epoll_pwait2` (`epoll_wait` where that is missing) with a timeout taken from the
/// earliest timer, so an idle loop with no timers makes no system calls and wakes zero times per
/// second. Everything that touches the loop, its handlers and the D-Bus connections attached to it
/// runs on the thread that calls `run()`.
public final class EventLoop: Scheduler {
    public typealias FDHandler = (_ events: UInt32) -> Void
    public typealias TimerID = LinuxKit.TimerID

    private struct Registration {
        var events: UInt32
        var handler: FDHandler
    }

    /// A handle to remove a prepare hook.
    public struct HookID: Hashable, Sendable {
        let raw: Int
    }

    // The loop's state is touched only on its thread, and no access to it spans a call that
    // could touch it again (handlers and callbacks are copied out first), so the runtime's
    // exclusivity checks, a few percent of a bus call's cost, are turned off for it.
    private let epfd: Int32
    /// The live registrations by token (an event finds its handler by indexing, no hashing), and
    /// the token of each watched fd.
    @exclusivity(unchecked) private var registrations = SlotTable<Registration>()
    @exclusivity(unchecked) private var tokenByFD: [Int32: UInt64] = [:]
    /// Timers: their callbacks by id (a slot table: ids increase, so they also order equal
    /// deadlines), and a heap of (deadline, id) with cancelled ids left in it until they surface.
    @exclusivity(unchecked) private var heap: [(deadline: UInt64, id: UInt64)] = []
    @exclusivity(unchecked) private var timerCallbacks = SlotTable<() -> Void>()
    /// Prepare hooks in order; a hook removed while they run is cleared in place (and dropped
    /// after the turn), so a hook that ends another hook's owner never leaves it to be called.
    @exclusivity(unchecked) private var prepareHooks: [(id: Int, hook: (() -> Void)?)] = []
    private var nextHookID = 0
    private var runningHooks = 0  // depth: a hook may run a turn of the loop itself
    private var clearedHooks = false
    @exclusivity(unchecked) private var stopRequested = false
    /// Told once the loop has done nothing for a while after doing something (`onQuiet`).
    private var quiet: (nanoseconds: UInt64, handler: () -> Void)?
    /// Whether the loop handled an event or a timer since `quiet` was last told.
    @exclusivity(unchecked) private var busySinceQuiet = true
    private let eventBuffer = UnsafeMutablePointer<epoll_event>.allocate(capacity: 64)

    public init() {
        epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(epfd >= 0, "epoll_create1 failed: errno \(errno)")
    }

    deinit {
        close(epfd)
        eventBuffer.deallocate()
    }

    /// Monotonic time in nanoseconds.
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// `Scheduler`: the monotonic clock.
    public var nowNanoseconds: UInt64 { EventLoop.now() }

    // MARK: file descriptors

    public static let readable = UInt32(EPOLLIN.rawValue)
    public static let writable = UInt32(EPOLLOUT.rawValue)
    public static let error = UInt32(EPOLLERR.rawValue)
    public static let hangup = UInt32(EPOLLHUP.rawValue)
    /// Urgent data; PSI triggers report with it.
    public static let priority = UInt32(EPOLLPRI.rawValue)

    /// Starts watching `fd` for `events` (`readable`, `writable`), or replaces the handler and
    /// events of its registration. Errors and hang-ups are always reported.
    public func watch(fd: Int32, events: UInt32, handler: @escaping FDHandler) {
        if let token = tokenByFD[fd] {
            registrations.update(token) { $0.handler = handler }
            setEvents(fd: fd, events: events)
            return
        }
        let token = registrations.insert(Registration(events: events, handler: handler))
        var ev = epoll_event()
        ev.events = events
        ev.data.u64 = token
        guard epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 else {
            registrations.remove(token)
            return
        }
        tokenByFD[fd] = token
    }

    /// Changes the events of a watched fd without replacing its handler.
    public func setEvents(fd: Int32, events: UInt32) {
        guard let token = tokenByFD[fd], let registration = registrations[token], registration.events != events
        else { return }
        var ev = epoll_event()
        ev.events = events
        ev.data.u64 = token
        if epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) == 0 { registrations.update(token) { $0.events = events } }
    }

    /// Stops watching `fd` (the caller still owns and closes it). An event for it still waiting
    /// in the current batch is dropped.
    public func unwatch(fd: Int32) {
        guard let token = tokenByFD.removeValue(forKey: fd) else { return }
        registrations.remove(token)
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nil)
    }

    public func isWatching(fd: Int32) -> Bool { tokenByFD[fd] != nil }

    // MARK: timers

    /// Runs `callback` once at `deadline` (monotonic nanoseconds; a past deadline runs on the
    /// next turn of the loop).
    @discardableResult
    public func schedule(at deadline: UInt64, _ callback: @escaping () -> Void) -> TimerID {
        let id = timerCallbacks.insert(callback)
        heapPush((deadline, id))
        return TimerID(raw: id)
    }

    /// `Scheduler`: runs `callback` once at `deadline` (monotonic nanoseconds).
    @discardableResult
    public func schedule(atNanoseconds deadline: UInt64, _ callback: @escaping () -> Void) -> TimerID {
        schedule(at: deadline, callback)
    }

    @discardableResult
    public func schedule(afterNanoseconds delay: UInt64, _ callback: @escaping () -> Void) -> TimerID {
        schedule(at: EventLoop.now() &+ delay, callback)
    }

    /// Cancels a timer; cancelling a fired or cancelled timer does nothing.
    public func cancel(_ id: TimerID) {
        timerCallbacks.remove(id.raw)
        // Cancelled entries leave the heap lazily, at their deadline; rebuild it when they
        // dominate, so rapid reschedules with long delays cannot grow it without bound.
        if heap.count > 1024, timerCallbacks.count * 4 < heap.count {
            let live = heap.filter { timerCallbacks.contains($0.id) }
            heap.removeAll(keepingCapacity: true)
            for e in live { heapPush(e) }
        }
    }

    /// The number of timers that will still fire (for tests and the idle check).
    public var pendingTimerCount: Int { timerCallbacks.count }

    // MARK: work from other threads

    /// A thread-safe way into the loop: jobs posted from any thread run on the loop's thread, in
    /// order, at its next turn. The loop sleeps until one arrives (an eventfd wakes it).
    public final class Mailbox: @unchecked Sendable {
        // @unchecked: `jobs` is guarded by `lock`; `fd` never changes.
        fileprivate let fd: Int32
        private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        private var jobs: [@Sendable () -> Void] = []

        fileprivate init() {
            fd = clinux_eventfd()
            precondition(fd >= 0, "eventfd failed: errno \(errno)")
            pthread_mutex_init(lock, nil)
        }

        deinit {
            pthread_mutex_destroy(lock)
            lock.deallocate()
            Glibc.close(fd)
        }

        private var closed = false

        /// Queues `job` for the loop's thread and wakes the loop. Returns false (and drops the
        /// job) once the mailbox is closed.
        @discardableResult
        public func post(_ job: @escaping @Sendable () -> Void) -> Bool {
            pthread_mutex_lock(lock)
            if closed {
                pthread_mutex_unlock(lock)
                return false
            }
            let wasEmpty = jobs.isEmpty
            jobs.append(job)
            pthread_mutex_unlock(lock)
            if wasEmpty {
                var one: UInt64 = 1
                _ = write(fd, &one, 8)
            }
            return true
        }

        /// Refuses later posts and returns the jobs still queued (call on the loop's thread
        /// when it is about to stop, and run or fail them).
        public func close() -> [@Sendable () -> Void] {
            pthread_mutex_lock(lock)
            defer { pthread_mutex_unlock(lock) }
            closed = true
            let left = jobs
            jobs.removeAll()
            return left
        }

        fileprivate func take() -> [@Sendable () -> Void] {
            var counter: UInt64 = 0
            _ = read(fd, &counter, 8)
            pthread_mutex_lock(lock)
            defer { pthread_mutex_unlock(lock) }
            let taken = jobs
            jobs.removeAll()
            return taken
        }
    }

    private var _mailbox: Mailbox?

    /// The loop's mailbox (created on first use; an idle mailbox costs nothing).
    public var mailbox: Mailbox {
        if let m = _mailbox { return m }
        let m = Mailbox()
        _mailbox = m
        watch(fd: m.fd, events: EventLoop.readable) { _ in
            for job in m.take() { job() }
        }
        return m
    }

    // MARK: running

    /// Runs `hook` before every sleep (libdbus dispatching uses this), until removed.
    @discardableResult
    public func addPrepareHook(_ hook: @escaping () -> Void) -> HookID {
        nextHookID += 1
        prepareHooks.append((nextHookID, hook))
        return HookID(raw: nextHookID)
    }

    public func removePrepareHook(_ id: HookID) {
        guard let i = prepareHooks.firstIndex(where: { $0.id == id.raw }) else { return }
        if runningHooks > 0 {
            prepareHooks[i].hook = nil
            clearedHooks = true
        } else {
            prepareHooks.remove(at: i)
        }
    }

    private func runPrepareHooks() {
        runningHooks += 1
        var i = 0
        while i < prepareHooks.count {
            if let hook = prepareHooks[i].hook { hook() }
            i += 1
        }
        runningHooks -= 1
        if runningHooks == 0, clearedHooks {
            clearedHooks = false
            prepareHooks.removeAll { $0.hook == nil }
        }
    }

    /// Calls `handler` when the loop has handled no event and fired no timer for `nanoseconds`
    /// after handling some (and once after it starts): once per spell of work, so that a loop
    /// with nothing to do still sleeps without a timeout, and wakes zero times per second.
    public func onQuiet(after nanoseconds: UInt64, _ handler: @escaping () -> Void) {
        quiet = (nanoseconds, handler)
        busySinceQuiet = true
    }

    /// Runs until `stop()`.
    public func run() {
        while !stopRequested {
            runOnce(maxWaitNanoseconds: nil)
        }
        stopRequested = false
    }

    /// Makes `run()` return after the handler that calls it; a turn in progress does not sleep.
    public func stop() { stopRequested = true }

    /// One turn: prepare hooks, wait for events or the next timer (at most `maxWaitNanoseconds`
    /// when given), handle them, fire due timers.
    public func runOnce(maxWaitNanoseconds: UInt64?) {
        runPrepareHooks()
        // A prepare hook (dispatching a message) may have asked to stop: do not sleep first.
        if stopRequested { return }
        var wait = nextDeadline().map { deadline -> UInt64 in
            let now = EventLoop.now()
            return deadline > now ? deadline - now : 0
        }
        if let cap = maxWaitNanoseconds { wait = min(wait ?? cap, cap) }
        // Waiting for quiet: the loop wakes when it has come, unless something happens first.
        var waitsForQuiet = false
        if busySinceQuiet, let quiet, wait.map({ $0 >= quiet.nanoseconds }) ?? true {
            wait = quiet.nanoseconds
            waitsForQuiet = true
        }
        let n = waitForEvents(nanoseconds: wait)
        if n == 0, waitsForQuiet, let quiet {
            busySinceQuiet = false
            quiet.handler()
        }
        if n > 0 {
            busySinceQuiet = true
            for i in 0..<Int(n) {
                // A handler earlier in this batch may have removed this registration (and the
                // fd number may already belong to a new one, with a new token).
                guard let handler = registrations[eventBuffer[i].data.u64]?.handler else { continue }
                handler(eventBuffer[i].events)
            }
        }
        fireDueTimers()
    }

    /// Kernels before 5.11, and valgrind before 3.20 (which is how the agent's instructions per
    /// call are counted), answer `epoll_pwait2` with ENOSYS: from then on the loop waits in
    /// `epoll_wait` with the timeout rounded up to whole milliseconds, so it never wakes early
    /// and spins.
    private var hasPwait2 = true

    private func waitForEvents(nanoseconds wait: UInt64?) -> Int32 {
        if hasPwait2 {
            let n: Int32
            if let wait {
                var ts = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
                n = epoll_pwait2(epfd, eventBuffer, 64, &ts, nil)
            } else {
                n = epoll_pwait2(epfd, eventBuffer, 64, nil, nil)
            }
            if n >= 0 || errno != ENOSYS { return n }
            hasPwait2 = false
        }
        let ms: Int32
        if let wait {
            let rounded = (wait + 999_999) / 1_000_000
            ms = Int32(clamping: rounded)
        } else {
            ms = -1
        }
        return epoll_wait(epfd, eventBuffer, 64, ms)
    }

    private func fireDueTimers() {
        guard !heap.isEmpty else { return }
        let now = EventLoop.now()
        while let top = heap.first, top.deadline <= now {
            heapPop()
            if let callback = timerCallbacks.remove(top.id) {
                busySinceQuiet = true
                callback()
            }
        }
    }

    private func nextDeadline() -> UInt64? {
        // Drop cancelled timers from the top so they cause no wake-up.
        while let top = heap.first, !timerCallbacks.contains(top.id) { heapPop() }
        return heap.first?.deadline
    }

    // MARK: binary heap ordered by (deadline, id) so equal deadlines fire in scheduling order

    private func less(_ a: (deadline: UInt64, id: UInt64), _ b: (deadline: UInt64, id: UInt64)) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.id < b.id
    }

    private func heapPush(_ e: (deadline: UInt64, id: UInt64)) {
        heap.append(e)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard less(heap[i], heap[parent]) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private func heapPop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        var i = 0
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var m = i
            if l < heap.count, less(heap[l], heap[m]) { m = l }
            if r < heap.count, less(heap[r], heap[m]) { m = r }
            if m == i { break }
            heap.swapAt(i, m)
            i = m
        }
    }
}
