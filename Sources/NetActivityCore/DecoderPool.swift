// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later

/// What the agent's image decoders do, as a state machine with no processes, descriptors or clocks
/// in it: it is told what happened (a request, a decoder that said it is ready, an answer, a
/// decoder that ended, the time) and answers with what to do (`Action`), which the agent's
/// `DecoderRunner` carries out. So every decision (which image goes next, when a decoder is given up,
/// when bubblewrap is) is tested as a table on a manual clock.
///
/// Decoders are of a kind: `.images` (the raster formats: the lean process every image goes to) or
/// `.svg` (a process of its own that loads librsvg, started only for SVG, so that no other decode
/// pays for its libraries). Up to `maxDecoders` processes run at once, of either kind, one request
/// each; a request whose kind has no decoder free, when the pool is full, lets an idle decoder of
/// the other kind go to make room. A request is sent to a decoder as soon as it is started (its socket holds it until the decoder has locked itself in) and must be
/// answered within `timeout`; a decoder that has had nothing to do for `idleTimeout` is let go.
/// Where bubblewrap is used and a decoder ends before it said it is ready, no byte of an image was
/// read yet: bubblewrap does not work here, so it is given up for good and the request waits
/// again, first in line.
public struct DecoderPool {
    public typealias JobID = UInt64
    public typealias ProcessID = UInt64

    /// What a decoder process reads.
    public enum Kind: Hashable, Sendable {
        case images, svg
    }

    public struct Configuration: Sendable {
        public var maxDecoders: Int
        public var timeout: Duration
        public var idleTimeout: Duration
        /// Apps and owners whose turns are remembered while none of their images waits.
        public var rememberedOwners: Int
        public init(
            maxDecoders: Int = 2, timeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(30),
            rememberedOwners: Int = 1024
        ) {
            self.maxDecoders = maxDecoders
            self.timeout = timeout
            self.idleTimeout = idleTimeout
            self.rememberedOwners = rememberedOwners
        }
    }

    /// A decoder process as the pool sees it.
    public enum ProcessState: Equatable, Sendable {
        /// Spawned, not yet said it is locked in; it may hold a request already.
        case starting
        /// Ready, with nothing to do since then.
        case idle(since: Instant)
        /// Ready, decoding `job`.
        case busy
        /// Ended or stopped: only its reaping is left (it is no longer counted).
        case gone
    }

    public struct Process: Equatable, Sendable {
        public let id: ProcessID
        public let kind: Kind
        /// Started inside bubblewrap.
        public let wrapped: Bool
        public internal(set) var state: ProcessState
        public internal(set) var job: JobID?
        /// When its request must have been answered.
        public internal(set) var deadline: Instant?
    }

    public enum Action: Equatable, Sendable {
        /// Start decoder process `id` of `kind` (inside bubblewrap when `bubblewrap`); a start that
        /// fails is told back with `spawnFailed`, and the actions after it for this process are moot.
        case spawn(ProcessID, Kind, bubblewrap: Bool)
        /// Hand request `job` to process `to` (the job leaves the queue).
        case send(JobID, to: ProcessID)
        /// Stop the process: killed at once (`kill`), or let go by closing its socket; then reap it.
        case stop(ProcessID, kill: Bool)
        /// Answer `job` with this failure: it will not be decoded.
        case fail(JobID, String)
        /// Bubblewrap did not work here (why): decoders run in their own sandbox alone from now on.
        case gaveUpBubblewrap(String)
    }

    public let configuration: Configuration
    /// Bubblewrap is used for new decoders (it was asked for and has not failed here).
    public private(set) var usesBubblewrap: Bool
    /// Why bubblewrap was given up, and why the last start failed (for the log and the tests).
    public private(set) var bubblewrapFailure: String?
    public private(set) var lastStartError: String?
    /// Decoders started, and stopped for dying, stopping, overrunning or lying.
    public private(set) var started: UInt64 = 0
    public private(set) var replaced: UInt64 = 0

    public private(set) var processes: [Process] = []
    private var nextProcess: ProcessID = 1
    private var nextJob: JobID = 1

    private struct Waiting {
        let id: JobID
        let owner: String
        let kind: Kind
    }
    /// What waits, per owner, in order. The next job is the first of the owner whose app runs the
    /// fewest decodes (then the owner running fewest, then the app and the owner served least
    /// recently, then the job waiting longest): one app's many images, or its many boxes of one,
    /// never make another app's image wait behind them all.
    private var waiting: [String: [Waiting]] = [:]
    /// Jobs that were sent to a decoder bubblewrap could not start: they go before all others.
    private var again: [Waiting] = []
    public private(set) var waitingCount = 0
    /// The owner of each job waiting or running.
    private var owners: [JobID: String] = [:]
    private var served: [String: UInt64] = [:]
    private var serviceCount: UInt64 = 0

    public init(configuration: Configuration = .init(), bubblewrap: Bool) {
        self.configuration = configuration
        usesBubblewrap = bubblewrap
    }

    /// Decoders counted against `maxDecoders` (not gone).
    public var processCount: Int { processes.count { $0.state != .gone } }
    public func process(_ id: ProcessID) -> Process? { processes.first { $0.id == id } }

    // MARK: events

    /// A new request of `owner` (an app's leaf) for a decoder of `kind`; its id, and what to do.
    public mutating func submit(owner: String, kind: Kind = .images, now: Instant) -> (JobID, [Action]) {
        let id = nextJob
        nextJob += 1
        waiting[owner, default: []].append(Waiting(id: id, owner: owner, kind: kind))
        waitingCount += 1
        owners[id] = owner
        return (id, dispatch(now: now))
    }

    /// The request no longer wants an answer. True when it was still waiting (it left the queue);
    /// a request already sent runs to its end, and its answer is dropped by the caller.
    public mutating func cancel(_ job: JobID) -> Bool {
        if let index = again.firstIndex(where: { $0.id == job }) {
            again.remove(at: index)
            waitingCount -= 1
            owners[job] = nil
            return true
        }
        guard let owner = owners[job], let index = waiting[owner]?.firstIndex(where: { $0.id == job }) else {
            return false
        }
        waiting[owner]!.remove(at: index)
        if waiting[owner]!.isEmpty { waiting[owner] = nil }
        waitingCount -= 1
        owners[job] = nil
        return true
    }

    /// Process `id` said it is locked in.
    public mutating func ready(_ id: ProcessID, now: Instant) -> [Action] {
        guard let i = index(id), processes[i].state == .starting else { return [] }
        processes[i].state = processes[i].job == nil ? .idle(since: now) : .busy
        return dispatch(now: now)
    }

    /// Process `id` answered its request as it should (the caller has the answer).
    public mutating func answered(_ id: ProcessID, now: Instant) -> [Action] {
        guard let i = index(id), let job = processes[i].job else { return [] }
        owners[job] = nil
        processes[i].job = nil
        processes[i].deadline = nil
        processes[i].state = .idle(since: now)
        return dispatch(now: now)
    }

    /// Process `id` ended (its socket closed or failed, a send to it failed), `why`.
    public mutating func ended(_ id: ProcessID, why: String, now: Instant) -> [Action] {
        guard let i = index(id), processes[i].state != .gone else { return [] }
        if processes[i].state == .starting, processes[i].wrapped, usesBubblewrap {
            return giveUpBubblewrap(i, why, now: now)
        }
        return replace(i, why, now: now)
    }

    /// Process `id` broke the protocol (an answer that is malformed, for another request, or with
    /// pixels not as promised): it is not trusted with another image.
    public mutating func misbehaved(_ id: ProcessID, why: String, now: Instant) -> [Action] {
        guard let i = index(id), processes[i].state != .gone else { return [] }
        return replace(i, why, now: now)
    }

    /// Process `id` could not be started: it, and every request waiting, fail with `why`.
    public mutating func spawnFailed(_ id: ProcessID, why: String, now: Instant) -> [Action] {
        lastStartError = why
        var actions: [Action] = []
        if let i = index(id) {
            if let job = processes[i].job {
                owners[job] = nil
                actions.append(.fail(job, why))
            }
            processes.remove(at: i)
        }
        let jobs = again + waiting.values.joined().sorted { $0.id < $1.id }
        again.removeAll()
        waiting.removeAll()
        waitingCount = 0
        for job in jobs {
            owners[job.id] = nil
            actions.append(.fail(job.id, why))
        }
        return actions
    }

    /// Process `id` was reaped: it is forgotten.
    public mutating func reaped(_ id: ProcessID) {
        processes.removeAll { $0.id == id && $0.state == .gone }
    }

    /// The earliest time `timePassed` has something to do.
    public var nextDeadline: Instant? {
        processes.compactMap { process -> Instant? in
            switch process.state {
            case .idle(let since): since + configuration.idleTimeout
            case .starting, .busy: process.deadline
            case .gone: nil
            }
        }.min()
    }

    /// The time is `now`: overdue requests fail (their decoders killed), idle decoders leave.
    public mutating func timePassed(now: Instant) -> [Action] {
        var actions: [Action] = []
        for process in processes {
            guard let i = index(process.id) else { continue }
            switch process.state {
            case .idle(let since) where since + configuration.idleTimeout <= now:
                processes[i].state = .gone
                actions.append(.stop(process.id, kill: false))
            case .starting, .busy:
                if let deadline = process.deadline, deadline <= now {
                    actions += replace(i, "the image decoder took longer than \(configuration.timeout)", now: now)
                }
            default: break
            }
        }
        return actions + dispatch(now: now)
    }

    // MARK: decisions

    private func index(_ id: ProcessID) -> Int? { processes.firstIndex { $0.id == id } }

    /// The decoder is done for: killed, its job (if any) failed with `why`, and what waits goes to
    /// the others or a new one.
    private mutating func replace(_ i: Int, _ why: String, now: Instant) -> [Action] {
        replaced += 1
        var actions: [Action] = [.stop(processes[i].id, kill: true)]
        if let job = processes[i].job {
            owners[job] = nil
            actions.append(.fail(job, why))
        }
        processes[i].state = .gone
        processes[i].job = nil
        processes[i].deadline = nil
        return actions + dispatch(now: now)
    }

    private mutating func giveUpBubblewrap(_ i: Int, _ why: String, now: Instant) -> [Action] {
        usesBubblewrap = false
        let failure = "bubblewrap did not start the decoder: \(why)"
        bubblewrapFailure = failure
        replaced += 1
        var actions: [Action] = [.gaveUpBubblewrap(failure), .stop(processes[i].id, kill: true)]
        if let job = processes[i].job, let owner = owners[job] {
            // Waits again, before all others: not an image's fault.
            again.append(Waiting(id: job, owner: owner, kind: processes[i].kind))
            waitingCount += 1
        }
        processes[i].state = .gone
        processes[i].job = nil
        processes[i].deadline = nil
        actions += dispatch(now: now)
        return actions
    }

    /// Whether a job of `kind` can go to a decoder now: one of its kind is free, one more may start,
    /// or an idle one of the other kind may be let go for it.
    private func servable(_ kind: Kind) -> Bool {
        processes.contains { $0.kind == kind && $0.job == nil && ($0.state == .starting || $0.state.isIdle) }
            || processCount < configuration.maxDecoders || processes.contains { $0.kind != kind && $0.state.isIdle }
    }

    /// The owner whose first waiting job goes next (see `waiting`), among those a decoder can take now.
    private func nextOwner() -> String? {
        var running: [Substring: Int] = [:]
        var runningByOwner: [String: Int] = [:]
        for process in processes {
            guard let job = process.job, let owner = owners[job] else { continue }
            running[ClientIdentity.app(ofLeaf: owner), default: 0] += 1
            runningByOwner[owner, default: 0] += 1
        }
        var best: (owner: String, rank: (Int, Int, UInt64, UInt64, UInt64))?
        let canServe = [Kind.images, .svg].filter(servable)
        for (owner, jobs) in waiting {
            guard let first = jobs.first, canServe.contains(first.kind) else { continue }
            let app = ClientIdentity.app(ofLeaf: owner)
            let rank = (
                running[app] ?? 0, runningByOwner[owner] ?? 0, served[String(app)] ?? 0, served[owner] ?? 0, first.id
            )
            if best == nil || rank < best!.rank { best = (owner, rank) }
        }
        return best?.owner
    }

    /// Hands waiting jobs to idle decoders, starting decoders up to `maxDecoders`.
    private mutating func dispatch(now: Instant) -> [Action] {
        var actions: [Action] = []
        while !again.isEmpty || !waiting.isEmpty {
            let job: Waiting
            if let first = again.first {
                guard servable(first.kind) else { break }
                job = again.removeFirst()
            } else {
                guard let owner = nextOwner() else { break }
                job = waiting[owner]!.removeFirst()
                if waiting[owner]!.isEmpty { waiting[owner] = nil }
            }
            let free = processes.firstIndex {
                $0.kind == job.kind && $0.job == nil && ($0.state == .starting || $0.state.isIdle)
            }
            let i: Int
            if let free {
                i = free
            } else {
                if processCount >= configuration.maxDecoders,
                    let idle = processes.firstIndex(where: { $0.kind != job.kind && $0.state.isIdle })
                {
                    // The pool is full: an idle decoder of the other kind goes to make room.
                    processes[idle].state = .gone
                    actions.append(.stop(processes[idle].id, kill: false))
                }
                processes.append(
                    Process(
                        id: nextProcess, kind: job.kind, wrapped: usesBubblewrap, state: .starting, job: nil,
                        deadline: nil))
                actions.append(.spawn(nextProcess, job.kind, bubblewrap: usesBubblewrap))
                nextProcess += 1
                started += 1
                i = processes.count - 1
            }
            let owner = job.owner
            waitingCount -= 1
            serviceCount += 1
            served[String(ClientIdentity.app(ofLeaf: owner))] = serviceCount
            served[owner] = serviceCount
            if served.count > configuration.rememberedOwners { served = served.filter { waiting[$0.key] != nil } }
            processes[i].job = job.id
            processes[i].deadline = now + configuration.timeout
            if processes[i].state != .starting { processes[i].state = .busy }
            actions.append(.send(job.id, to: processes[i].id))
        }
        return actions
    }
}

extension DecoderPool.ProcessState {
    var isIdle: Bool {
        if case .idle = self { true } else { false }
    }
}
