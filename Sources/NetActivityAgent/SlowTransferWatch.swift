// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import LinuxKit
import NetActivityCore

/// The loop's side of `SlowTransferRule`: while transfers hold slots and work waits for one, a tick
/// every `tick` asks the rule which transfers should give their slot up
/// (`ImageDownloader.yieldSlot`) and go on outside the limit. No ticks while nothing waits.
final class SlowTransferWatch {
    /// A stalled server yields after two ticks (half a second), a dribbling one after a window of
    /// eight (2 s) with less than 16 KiB; the slowest transfer of an app beyond its share of slots,
    /// while another app's work waits, with less than 256 KiB in that window.
    static let tick: Duration = .milliseconds(250)

    private let context: AgentContext
    private let core: ImageDownloader
    /// Bytes a transfer has received so far.
    private let received: (UInt64) -> UInt64
    private var rule = SlowTransferRule(stallTicks: 2, windowTicks: 8, floorBytes: 16 * 1024)
    private var timer: TimerID?

    init(context: AgentContext, core: ImageDownloader, received: @escaping (UInt64) -> UInt64) {
        self.context = context
        self.core = core
        self.received = received
    }

    /// A transfer started and holds a slot; or work came to wait.
    func started(_ transfer: UInt64) {
        rule.started(transfer)
        watch()
    }

    /// Work came to wait for a slot.
    func queued() {
        watch()
    }

    /// The transfer holds no slot any more (paused or ended).
    func stopped(_ transfer: UInt64) {
        rule.forget(transfer)
    }

    /// Starts the ticks while transfers hold slots and work waits; every watch begins from the
    /// bytes its transfer has now.
    private func watch() {
        guard timer == nil, !rule.isEmpty, core.queuedCount > 0 else { return }
        rule.restart(received: received)
        timer = context.schedule(after: Self.tick) { [weak self] in self?.judge() }
    }

    private func judge() {
        timer = nil
        guard core.queuedCount > 0 else { return }  // nobody waits: no ticks until someone does
        let beyondShare = core.transfersBeyondShare()
        // Of the transfers slow beyond their apps' share, each app gives up its slowest only.
        var slowestBeyondShare: [String: (transfer: UInt64, moved: UInt64)] = [:]
        for transfer in rule.transfers {
            guard core.holdsSlot(transfer) else {
                rule.forget(transfer)
                continue
            }
            let bytes = received(transfer)
            guard let verdict = rule.tick(transfer, received: bytes, beyondShare: beyondShare[transfer] != nil) else {
                continue
            }
            if case .slowBeyondShare(let moved) = verdict, let app = beyondShare[transfer] {
                if moved < slowestBeyondShare[app]?.moved ?? .max { slowestBeyondShare[app] = (transfer, moved) }
                continue
            }
            yield(transfer, verdict)
        }
        for (transfer, moved) in slowestBeyondShare.values { yield(transfer, .slowBeyondShare(moved: moved)) }
        if !rule.isEmpty { timer = context.schedule(after: Self.tick) { [weak self] in self?.judge() } }
    }

    private func yield(_ transfer: UInt64, _ verdict: SlowTransferRule.Verdict) {
        guard core.yieldSlot(transfer) else { return }
        rule.forget(transfer)
        let why =
            switch verdict {
            case .stalled: "moved no byte for \(Self.tick * rule.stallTicks)"
            case .slow(let moved): "moved \(moved) bytes in \(Self.tick * rule.windowTicks)"
            case .slowBeyondShare(let moved):
                "moved \(moved) bytes in \(Self.tick * rule.windowTicks), the slowest of an app beyond its share of slots"
            }
        context.logger.info("Transfer \(transfer) \(why): it gives its slot to queued work and goes on")
    }
}
