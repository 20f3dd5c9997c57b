// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// How response bytes are let in, pure (the agent's libcurl fetcher asks it for each chunk):
///
/// - **Per turn**: all transfers together take at most `turnQuota` bytes per turn of the loop.
///   Past it a chunk waits for the next turn (`nextTurn`), so bytes arriving faster than the loop
///   can copy them never hold it: between turns it answers the bus.
/// - **In flight**: response bytes held by running transfers are bounded (`FairQuota`: a budget
///   of 40 % of the limit before apps' shares apply, then each app's share). A chunk past that
///   waits until bytes are freed (`waitForRoom`), except for the oldest running transfer (and an
///   app's oldest while the limit holds), so the budget can never be held by transfers that all
///   wait: the oldest completes and frees its bytes.
///
/// Transfers are known by a serial that grows with their start order.
public struct TransferAdmission: Sendable {
    public enum Verdict: Equatable, Sendable {
        /// Take the chunk now (it is charged).
        case take
        /// Keep it for the next turn of the loop.
        case nextTurn
        /// Keep it until bytes are freed (`ended` says when).
        case waitForRoom
    }

    public let turnQuota: Int
    public private(set) var inFlight: FairQuota
    /// Bytes taken in the current turn.
    public private(set) var turnBytes = 0
    /// Running transfers: their app and the bytes charged to them.
    private var live: [UInt64: (app: String, charged: Int)] = [:]

    /// `inFlightLimit`: response bytes all running transfers may hold together.
    public init(inFlightLimit: Int, turnQuota: Int = 128 * 1024) {
        self.turnQuota = turnQuota
        inFlight = FairQuota(budget: max(1, inFlightLimit * 2 / 5), limit: inFlightLimit, perConnection: Int.max)
    }

    /// `holding`: bytes the transfer has before it starts (a body continued with a range
    /// request), charged whatever room there is: they are held already.
    public mutating func started(_ serial: UInt64, app: String, holding: Int = 0) {
        live[serial] = (app, holding)
        if holding > 0 { inFlight.charge(connection: app, leaf: app, cost: holding) }
    }

    /// The transfer ended (or was cancelled): its bytes are free. True when it held any (so
    /// transfers waiting for room may try again).
    @discardableResult
    public mutating func ended(_ serial: UInt64) -> Bool {
        guard let t = live.removeValue(forKey: serial), t.charged > 0 else { return false }
        inFlight.release(connection: t.app, leaf: t.app, cost: t.charged)
        return true
    }

    /// Whether transfer `serial` may take a chunk of `bytes` now; a chunk it takes is charged.
    public mutating func offer(_ serial: UInt64, bytes: Int) -> Verdict {
        guard let t = live[serial] else { return .take }  // unknown: not bounded (never happens)
        guard turnBytes < turnQuota else { return .nextTurn }
        let fits = inFlight.total + bytes <= inFlight.limit
        let admitted =
            inFlight.check(connection: t.app, leaf: t.app, cost: bytes) == nil || isOldest(serial, ofApp: nil)
            || (fits && isOldest(serial, ofApp: t.app))
        guard admitted else { return .waitForRoom }
        inFlight.charge(connection: t.app, leaf: t.app, cost: bytes)
        live[serial]!.charged += bytes
        turnBytes += bytes
        return .take
    }

    /// A new turn of the loop; returns whether the last one took its whole quota (bytes arrive
    /// faster than the loop takes them: the loop should let others on its CPU go first).
    public mutating func newTurn() -> Bool {
        defer { turnBytes = 0 }
        return turnBytes >= turnQuota
    }

    /// Bytes charged to a running transfer.
    public func charged(_ serial: UInt64) -> Int { live[serial]?.charged ?? 0 }

    private func isOldest(_ serial: UInt64, ofApp app: String?) -> Bool {
        !live.contains { $0.key < serial && (app == nil || $0.value.app == app) }
    }
}
