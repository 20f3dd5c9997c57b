// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// One accountant for a budget of things clients make the agent hold (tasks, leases, pending
/// downloads, bytes in flight): a global budget, a per-connection cap, and max-min fairness between
/// apps with a floor for each (docs/contract.md, "Trust and isolation"; dbus-broker's user quotas).
///
/// What is charged is a *leaf* (`ClientIdentity.leaf`): an app, or one process of the unscoped
/// pool ("unscoped/pid:7"), whose app is the part before the "/". The rule:
///
/// - While the total is under `budget`, anyone is admitted (one app alone has all of it, as
///   AFNetworking would).
/// - Past it, a leaf is admitted only while it holds less than its share: `budget` ÷ the apps
///   holding any (counting the asker's), ÷ the leaves of its app holding any (counting the asker).
///   An app under its share is therefore never refused, whoever holds the rest, and extra
///   processes or connections of one app only divide that app's share.
/// - Nothing passes `limit`, nor `perConnection` for one connection. By default the limit is 2.5
///   times the budget: after one app took the whole budget, five newcomers in turn still get their
///   shares (budget/2 + /3 + /4 + /5 + /6 < 1.5 budget). Past the limit even an app under its share
///   is refused: the floor holds up to it.
///
/// Every operation is O(1).
public struct FairQuota: Sendable {
    public let budget: Int
    public let limit: Int
    public let perConnection: Int
    public private(set) var total = 0
    private var byLeaf: [String: Int] = [:]
    private var byApp: [String: (held: Int, leaves: Int)] = [:]
    private var byConnection: [String: Int] = [:]

    /// Why a charge was refused, with the figures for the message.
    public enum Refusal: Error, Equatable, Sendable {
        /// The connection holds `held`, its cap.
        case connection(held: Int)
        /// The leaf holds `held`, its share when the budget is taken.
        case share(held: Int, share: Int)
        /// All clients hold `held`, the limit.
        case total(held: Int)
    }

    /// Whether, past the budget, an app as a whole is held to its share too (budget ÷ the apps
    /// holding any): without it, each new leaf of one app (a process of the unscoped pool) is
    /// admitted under its own share, and enough of them use up the room up to `limit` that other
    /// apps' floors need. For what any process can ask for many times over (waiting decodes,
    /// readers of the object tree).
    public let holdsAppsToShare: Bool

    public init(budget: Int, limit: Int? = nil, perConnection: Int, holdsAppsToShare: Bool = false) {
        precondition(budget > 0 && perConnection > 0)
        self.budget = budget
        self.limit = max(budget, limit ?? budget * 5 / 2)
        self.perConnection = perConnection
        self.holdsAppsToShare = holdsAppsToShare
    }

    /// The number of apps holding any.
    public var appCount: Int { byApp.count }

    public func held(byLeaf leaf: String) -> Int { byLeaf[leaf] ?? 0 }
    public func held(byConnection connection: String) -> Int { byConnection[connection] ?? 0 }
    public func held(byApp app: String) -> Int { byApp[app]?.held ?? 0 }

    /// `leaf`'s share of the budget if it held one more: budget ÷ apps ÷ the app's leaves.
    public func share(of leaf: String) -> Int {
        let app = String(ClientIdentity.app(ofLeaf: leaf))
        let holder = byApp[app]
        let apps = byApp.count + (holder == nil ? 1 : 0)
        let leaves = (holder?.leaves ?? 0) + (byLeaf[leaf] == nil ? 1 : 0)
        return max(1, Int(FairShare.of(UInt64(budget), apps: apps, leaves: leaves)))
    }

    /// `app`'s share of the budget as a whole if it held one more: budget ÷ the apps holding any.
    public func share(ofApp app: String) -> Int {
        max(1, Int(FairShare.of(UInt64(budget), apps: byApp.count + (byApp[app] == nil ? 1 : 0), leaves: 1)))
    }

    /// The apps holding any.
    public var apps: [String] { Array(byApp.keys) }

    /// Whether `connection` (charged as `leaf`) may take `cost` more; nil when it may.
    public func check(connection: String, leaf: String, cost: Int = 1) -> Refusal? {
        let mine = byConnection[connection] ?? 0
        if mine + cost > perConnection { return .connection(held: mine) }
        if total + cost > limit { return .total(held: total) }
        if total + cost <= budget { return nil }
        if holdsAppsToShare {
            let app = String(ClientIdentity.app(ofLeaf: leaf))
            let held = byApp[app]?.held ?? 0
            let appShare = share(ofApp: app)
            if held + cost > appShare { return .share(held: held, share: appShare) }
        }
        let held = byLeaf[leaf] ?? 0
        let share = share(of: leaf)
        return held + cost <= share ? nil : .share(held: held, share: share)
    }

    /// Records `cost` more for `connection` as `leaf` (after `check`, or unconditionally for what
    /// must be counted anyway).
    public mutating func charge(connection: String, leaf: String, cost: Int = 1) {
        guard cost > 0 else { return }
        total += cost
        byConnection[connection, default: 0] += cost
        let app = String(ClientIdentity.app(ofLeaf: leaf))
        let before = byLeaf[leaf] ?? 0
        byLeaf[leaf] = before + cost
        byApp[app, default: (0, 0)].held += cost
        if before == 0 { byApp[app]!.leaves += 1 }
    }

    /// Checks, then charges; the refusal otherwise.
    public mutating func take(connection: String, leaf: String, cost: Int = 1) throws(Refusal) {
        if let refusal = check(connection: connection, leaf: leaf, cost: cost) { throw refusal }
        charge(connection: connection, leaf: leaf, cost: cost)
    }

    /// Gives back `cost` that `connection` held as `leaf` (never below zero).
    public mutating func release(connection: String, leaf: String, cost: Int = 1) {
        guard cost > 0 else { return }
        if let c = byConnection[connection] {
            byConnection[connection] = c > cost ? c - cost : nil
        }
        guard let before = byLeaf[leaf] else { return }
        let freed = min(before, cost)
        total -= freed
        byLeaf[leaf] = before > freed ? before - freed : nil
        let app = String(ClientIdentity.app(ofLeaf: leaf))
        guard var entry = byApp[app] else { return }
        entry.held -= freed
        if before == freed { entry.leaves -= 1 }
        byApp[app] = entry.leaves > 0 ? entry : nil
    }
}

extension FairQuota.Refusal {
    /// A sentence for `LimitsExceeded`: `noun` is what is counted ("tasks running or suspended"),
    /// `client` the connection, `leaf` what it is charged as.
    public func message(_ noun: String, client: String, leaf: String, quota: FairQuota) -> String {
        switch self {
        case .connection(let held):
            "Client \(client) already holds \(held) \(noun), the most one client may"
        case .share(let held, let share):
            "The app \(leaf) already holds \(held) \(noun) over all its connections, its share (\(share)) while the agent's budget of \(quota.budget) is taken by \(quota.appCount) apps"
        case .total(let held):
            "The agent already holds \(held) \(noun), the most it holds for all clients"
        }
    }
}

/// The one share rule of every budget and cache the agent keeps for apps (`FairQuota`,
/// `OwnerLedger`): `budget` ÷ the apps holding any ÷ the leaves of the asker's app holding any,
/// each count taking the asker in. Max-min fairness with a floor, as dbus-broker's user quotas.
public enum FairShare {
    @inlinable public static func of(_ budget: UInt64, apps: Int, leaves: Int) -> UInt64 {
        budget / UInt64(max(1, apps)) / UInt64(max(1, leaves))
    }
}
