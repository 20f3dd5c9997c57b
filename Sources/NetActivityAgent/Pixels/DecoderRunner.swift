// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityCore

/// Carries out `DecoderPool`'s decisions: spawns `DecoderProcess`es in their `DecoderSandbox`, hands
/// them images, reads their answers off the loop (each socket a watch), and keeps one timer on the
/// scheduler at the pool's next deadline. No decoder runs in the agent, and the loop never waits on
/// one: a decoder that crashes, stops or overruns is killed and replaced while its request alone
/// fails.
///
/// Images waiting for a decoder hold a descriptor each, so they are charged to their owner (an
/// app's leaf) in the accounts' `.decoderQueue`: a client that asks for thousands cannot run the
/// agent out, and past the budget an owner is admitted only under its fair share.
final class DecoderRunner {
    private let sandbox: DecoderSandbox
    private let loop: EventLoop
    private let scheduler: any Scheduler
    private let accounts: AgentAccounts
    private let limits: DecodeLimits
    private var pool: DecoderPool
    /// Told what the log should hear (bubblewrap given up).
    var warn: (String) -> Void = { _ in }

    private final class Job {
        let image: Int32
        let ask: PixelAsk
        let owner: String
        /// Charged to the owner while it waits.
        var charged = true
        var completion: ((Result<DecodedPixels, DecodeFailure>) -> Void)?
        init(
            image: Int32, ask: PixelAsk, owner: String,
            completion: @escaping (Result<DecodedPixels, DecodeFailure>) -> Void
        ) {
            self.image = image
            self.ask = ask
            self.owner = owner
            self.completion = completion
        }
        deinit { Closer.close(image) }
    }

    private var jobs: [DecoderPool.JobID: Job] = [:]
    private var processes: [DecoderPool.ProcessID: DecoderProcess] = [:]
    private var timer: (id: TimerID, at: Instant)?

    init(
        sandbox: DecoderSandbox, loop: EventLoop, scheduler: (any Scheduler)? = nil,
        configuration: DecoderPool.Configuration = .init(), limits: DecodeLimits = .init(),
        accounts: AgentAccounts = AgentAccounts()
    ) {
        self.sandbox = sandbox
        self.loop = loop
        self.scheduler = scheduler ?? loop
        self.accounts = accounts
        self.limits = limits
        var configuration = configuration
        configuration.rememberedOwners = 4 * accounts[.decoderQueue].limit
        pool = DecoderPool(configuration: configuration, bubblewrap: sandbox.bubblewrap != nil)
    }

    deinit {
        for process in processes.values { process.stop(kill: true, loop: loop) {} }
    }

    /// Decoder processes running now, and their pids (for tests and logs).
    var processCount: Int { pool.processCount }
    var pids: [Int32] { pool.processes.filter { $0.state != .gone }.compactMap { processes[$0.id]?.pid } }
    /// Images waiting for a decoder now.
    var waitingImages: Int { pool.waitingCount }
    /// Decoders started, and killed for dying, stopping, overrunning or lying.
    var started: UInt64 { pool.started }
    var replaced: UInt64 { pool.replaced }
    /// Why bubblewrap was given up, if it was; whether it is used.
    var bubblewrapFailure: String? { pool.bubblewrapFailure }
    var usesBubblewrap: Bool { pool.usesBubblewrap }

    private var now: Instant { Instant(nanoseconds: scheduler.nowNanoseconds) }

    /// Decodes the image in `image` (a sealed memfd; taken, and closed when done) as `ask` says (its
    /// box, colours and frames), in a decoder of `kind`, for `owner`. `completion` comes once, on a later turn, unless the
    /// returned closure cancels it.
    func decode(
        image: Int32, ask: PixelAsk, kind: DecoderPool.Kind = .images, owner: String = "",
        _ completion: @escaping (Result<DecodedPixels, DecodeFailure>) -> Void
    ) -> () -> Void {
        if let refusal = accounts.check(.decoderQueue, connection: owner, leaf: owner) {
            Closer.close(image)
            let why =
                switch refusal {
                case .connection(let held):
                    "\(owner) has \(held) images waiting for the decoder; ask again when one is done"
                case .share(let held, let share):
                    "\(owner) has \(held) images waiting for the decoder, its share while others wait too (\(share)); ask again when one is done"
                case .total(let held): "\(held) images wait for the decoder; ask again"
                }
            scheduler.schedule(afterNanoseconds: 0) { completion(.failure(.busy(why))) }
            return {}
        }
        accounts.charge(.decoderQueue, connection: owner, leaf: owner)
        let job = Job(image: image, ask: ask, owner: owner, completion: completion)
        let (id, actions) = pool.submit(owner: owner, kind: kind, now: now)
        jobs[id] = job
        perform(actions)
        return { [weak self] in self?.cancel(id) }
    }

    private func cancel(_ id: DecoderPool.JobID) {
        guard let job = jobs[id] else { return }
        job.completion = nil
        if pool.cancel(id) {
            release(job)
            jobs[id] = nil
        }
    }

    private func release(_ job: Job) {
        guard job.charged else { return }
        job.charged = false
        accounts.release(.decoderQueue, connection: job.owner, leaf: job.owner)
    }

    /// Carries out `actions` in order, with what they lead to (a spawn or a send that fails is told
    /// back to the pool), then sets the timer to the pool's next deadline.
    private func perform(_ actions: [DecoderPool.Action]) {
        var todo = actions[...]
        var unstarted: Set<DecoderPool.ProcessID> = []
        while let action = todo.popFirst() {
            var next: [DecoderPool.Action] = []
            switch action {
            case .spawn(let id, let kind, let wrapped):
                do {
                    let process = try DecoderProcess(
                        sandbox.command(wrapped: wrapped, kind: kind), executable: sandbox.executable)
                    processes[id] = process
                    loop.watch(fd: process.socket, events: EventLoop.readable) { [weak self] _ in self?.read(id) }
                } catch {
                    unstarted.insert(id)
                    next = pool.spawnFailed(id, why: "the image decoder could not be started: \(error)", now: now)
                }
            case .send(let jobID, let id):
                guard let job = jobs[jobID] else { continue }
                release(job)
                // A decoder that did not start fails this job (`spawnFailed`).
                guard !unstarted.contains(id), let process = processes[id] else { continue }
                if let why = process.send(jobID, image: job.image, ask: job.ask, limits: limits) {
                    next = pool.ended(id, why: why, now: now)
                }
            case .stop(let id, let kill):
                processes[id]?.stop(kill: kill, loop: loop) { [weak self] in
                    self?.processes[id] = nil
                    self?.pool.reaped(id)
                }
            case .fail(let jobID, let why):
                guard let job = jobs.removeValue(forKey: jobID) else { continue }
                release(job)
                // On a later turn: never inside the caller's own `decode`.
                scheduler.schedule(afterNanoseconds: 0) { job.completion?(.failure(.failed(why))) }
            case .gaveUpBubblewrap(let why):
                warn("\(why) (\(sandbox.bubblewrap ?? "bwrap")); decoding in the decoder's own sandbox alone")
            }
            todo += next
        }
        rearm()
    }

    private func read(_ id: DecoderPool.ProcessID) {
        guard let process = processes[id], let state = pool.process(id) else { return }
        let job = state.job.flatMap { jobs[$0] }
        switch process.receive(ask: job?.ask ?? PixelAsk(), limits: limits) {
        case .nothing: return
        case .ready: perform(pool.ready(id, now: now))
        case .ended(let why): perform(pool.ended(id, why: why, now: now))
        case .misbehaved(let why): perform(pool.misbehaved(id, why: why, now: now))
        case .answer(let answered, let result):
            guard let jobID = state.job, answered == jobID else {
                return perform(pool.misbehaved(id, why: "the image decoder answered another request", now: now))
            }
            let job = jobs.removeValue(forKey: jobID)
            job?.completion?(result)
            perform(pool.answered(id, now: now))
        }
    }

    /// One timer, at the pool's next deadline.
    private func rearm() {
        let deadline = pool.nextDeadline
        guard deadline != timer?.at else { return }
        if let timer { scheduler.cancel(timer.id) }
        timer = nil
        guard let deadline else { return }
        let id = scheduler.schedule(atNanoseconds: deadline.nanoseconds) { [weak self] in
            guard let self else { return }
            timer = nil
            perform(pool.timePassed(now: now))
        }
        timer = (id, deadline)
    }
}
