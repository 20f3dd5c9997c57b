// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import LinuxKit
import NetActivityContract
import NetActivityCore

/// What the system says about downloads, and what the downloader does about it: a metered
/// connection or power-saver holds `very-low` work (as far as the user's settings let them),
/// going offline fails what runs and what starts (`FetchPipeline`), and sleep stops every transfer
/// until the system wakes. Told whether transfers run after every start, end and pause (at the end
/// of that turn), so that a sleep inhibitor is held only while they do.
public final class DownloadConditions {
    /// Which conditions hold `very-low` work (the settings' `defer-when-metered`,
    /// `defer-in-power-saver`).
    public struct Deferral: Equatable, Sendable {
        public var whenMetered = true
        public var inPowerSaver = true
        public init(whenMetered: Bool = true, inPowerSaver: Bool = true) {
            self.whenMetered = whenMetered
            self.inPowerSaver = inPowerSaver
        }
    }

    private let context: AgentContext
    private let core: ImageDownloader
    private let pipeline: FetchPipeline
    private let prefetching: Prefetching

    /// What the system says (metered, power-saver, offline) and which of those the user lets hold
    /// work; a change of either may change what holds very-low work.
    private var state = SystemConditions.State() {
        didSet { holdReasonsChanged(from: Self.holdReasons(oldValue, deferral)) }
    }
    private var deferral = Deferral() {
        didSet { holdReasonsChanged(from: Self.holdReasons(state, oldValue)) }
    }

    /// Told whether transfers run (a sleep inhibitor is held while they do).
    var onRunning: ((Bool) -> Void)?
    private var wasRunning = false

    /// `runningChanged` at the end of this turn: a transfer that ends as the next starts keeps
    /// the inhibitor rather than dropping and taking it again.
    private lazy var runningCheck = NextTurn(context.scheduler, bound(self) { $0.runningChanged() })

    init(context: AgentContext, core: ImageDownloader, pipeline: FetchPipeline, prefetching: Prefetching) {
        self.context = context
        self.core = core
        self.pipeline = pipeline
        self.prefetching = prefetching
    }

    /// The reasons that hold `very-low` work now.
    var holdReasons: (metered: Bool, powerSaver: Bool) { Self.holdReasons(state, deferral) }

    private static func holdReasons(
        _ state: SystemConditions.State, _ deferral: Deferral
    ) -> (metered: Bool, powerSaver: Bool) {
        (state.metered && deferral.whenMetered, state.powerSaver && deferral.inPowerSaver)
    }

    func set(_ new: SystemConditions.State) {
        let wentOffline = new.offline && !state.offline
        state = new
        pipeline.offline = new.offline
        if wentOffline { pipeline.failInFlight() }
    }

    func set(_ new: Deferral) {
        deferral = new
    }

    private func holdReasonsChanged(from before: (metered: Bool, powerSaver: Bool)) {
        let after = holdReasons
        guard before != after else { return }
        core.holdingVeryLow = after.metered || after.powerSaver
        prefetching.held = core.holdingVeryLow
        context.emitPropertiesChanged(.downloader, [], invalidated: [DownloaderMember.Property.deferred.rawValue])
    }

    /// A transfer started, paused or ended.
    func transfersChanged() {
        runningCheck.request()
    }

    private func runningChanged() {
        let running = core.activeCount + core.yieldedCount > 0
        guard running != wasRunning else { return }
        wasRunning = running
        onRunning?(running)
    }

    /// The system is about to sleep (logind's PrepareForSleep(true)): every running transfer
    /// stops and waits in the queue, and nothing starts until `wake`.
    func sleep() {
        let running = core.activeCount + core.yieldedCount
        context.logger.info("The system is going to sleep: \(running) transfers stop until it wakes")
        // Bodies under way are kept where their servers can continue them (Range) after waking.
        if running > 0 { pipeline.keepPartialBodies() }
        core.pauseAll()
        runningChanged()
    }

    /// The system woke up: the queue starts again (stopped transfers first in their order).
    func wake() {
        core.resumeAll()
        runningChanged()
        prefetching.pumpSoon()
    }
}
