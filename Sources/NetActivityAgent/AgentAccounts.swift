// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import NetActivityContract
public import NetActivityCore

/// What apps make the agent hold, in one place: every budget by its `Resource`, each kept by the
/// same rule (`FairQuota`, shares by `FairShare`), its figures from `NetActivityLimits`. The rooms
/// that admit charge it here; the rooms that keep bytes (the caches, the transfers) keep their own
/// ledgers, which evict or pause by the same share rule, and show them here. `holdings` answers
/// "what does app X hold?" (the `Accounts` method, `netactivity accounts`).
public final class AgentAccounts {
    public typealias Resource = ActivityMember.Resource

    /// What one app holds of one resource, and the figures it is held to.
    public struct Holding: Equatable, Sendable {
        public var app: String
        public var resource: Resource
        public var held: UInt64
        /// Its share now: the budget ÷ the apps holding any, the app counted.
        public var share: UInt64
        public var budget: UInt64
        public var limit: UInt64
    }

    /// The open-file limit the descriptor budgets are cut from.
    public let fileLimit: UInt64
    private var quotas: [Resource: FairQuota]
    private var shown: [Resource: Shown] = [:]

    private struct Shown {
        weak var book: (any AccountBook)?
    }

    public init(fileLimit: UInt64 = 1024) {
        self.fileLimit = fileLimit
        let leases = NetActivityLimits.leasesInAll(fileLimit: fileLimit)
        let decoderQueue = NetActivityLimits.decoderWaiting(fileLimit: fileLimit)
        quotas = [
            .leases: FairQuota(
                budget: max(1, leases * 2 / 5), limit: leases,
                perConnection: Int(NetActivityLimits.leasesPerClient(fileLimit: fileLimit))),
            .tasks: FairQuota(
                budget: NetActivityLimits.liveTasksBudget, limit: NetActivityLimits.maxLiveTasks,
                perConnection: NetActivityLimits.maxLiveTasksPerClient),
            .listedTasks: FairQuota(
                budget: NetActivityLimits.listedTasksBudget, limit: NetActivityLimits.listedTasksLimit,
                perConnection: NetActivityLimits.listedTasksLimit),
            // One per connection, and the unscoped pool held to one app's share: any process may
            // follow the tree, and a crowd of them must leave room for a panel that comes later.
            .treeReaders: FairQuota(
                budget: NetActivityLimits.treeReadersBudget, limit: NetActivityLimits.maxTreeReaders,
                perConnection: 1, holdsAppsToShare: true),
            .downloads: FairQuota(
                budget: NetActivityLimits.pendingDownloadsBudget, limit: NetActivityLimits.maxPendingDownloads,
                perConnection: NetActivityLimits.maxPendingDownloadsPerClient),
            // The per-connection cap is the app's: prefetches are charged to the app.
            .prefetchURLs: FairQuota(
                budget: NetActivityLimits.prefetchURLsBudget, limit: NetActivityLimits.maxPrefetchURLs,
                perConnection: NetActivityLimits.maxPrefetchURLsPerApp),
            // Charged per leaf (each process of the unscoped pool), the pool held to one app's share.
            .decoderQueue: FairQuota(
                budget: max(1, decoderQueue * 2 / 5), limit: decoderQueue,
                perConnection: NetActivityLimits.maxDecoderWaitingPerApp, holdsAppsToShare: true),
        ]
    }

    /// The budget of `resource` (one this class keeps).
    public subscript(resource: Resource) -> FairQuota {
        guard let quota = quotas[resource] else { preconditionFailure("\(resource) is kept by its room") }
        return quota
    }

    /// Whether `connection`, charged as `leaf`, may take `cost` more of `resource`; nil when it may.
    public func check(_ resource: Resource, connection: String, leaf: String, cost: Int = 1) -> FairQuota.Refusal? {
        self[resource].check(connection: connection, leaf: leaf, cost: cost)
    }

    /// Records `cost` more (after `check`, or unconditionally for what must be counted anyway).
    public func charge(_ resource: Resource, connection: String, leaf: String, cost: Int = 1) {
        quotas[resource]!.charge(connection: connection, leaf: leaf, cost: cost)
    }

    /// Checks and charges, or `LimitsExceeded` saying which budget and why.
    public func take(_ resource: Resource, connection: String, leaf: String, cost: Int = 1) throws(NetActivityError) {
        if let refusal = check(resource, connection: connection, leaf: leaf, cost: cost) {
            throw .limitsExceeded(refusalMessage(refusal, resource, connection: connection, leaf: leaf))
        }
        charge(resource, connection: connection, leaf: leaf, cost: cost)
    }

    public func release(_ resource: Resource, connection: String, leaf: String, cost: Int = 1) {
        quotas[resource]!.release(connection: connection, leaf: leaf, cost: cost)
    }

    /// A sentence for `LimitsExceeded`.
    public func refusalMessage(_ refusal: FairQuota.Refusal, _ resource: Resource, connection: String, leaf: String)
        -> String
    {
        refusal.message(Self.noun(resource), client: connection, leaf: leaf, quota: self[resource])
    }

    static func noun(_ resource: Resource) -> String {
        switch resource {
        case .leases: "leases"
        case .tasks: "tasks running or suspended"
        case .listedTasks: "tasks in the object tree"
        case .treeReaders: "peers following the task list"
        case .downloads: "downloads waited for"
        case .prefetchURLs: "prefetched URLs waiting"
        case .decoderQueue: "images waiting for a decoder"
        case .bytesInFlight: "response bytes in flight"
        case .images: "bytes of cached images"
        case .pixels: "bytes of decoded images"
        case .disk: "bytes on disk"
        }
    }

    // MARK: what apps hold

    /// Shows the budgets `book` keeps itself (bytes: the caches, the transfers), for as long as
    /// it lives.
    func show(_ resources: [Resource], from book: any AccountBook) {
        for resource in resources {
            precondition(quotas[resource] == nil, "\(resource) is kept here")
            shown[resource] = Shown(book: book)
        }
    }

    /// What `app` holds of every resource (each one, held or not), or what every app holding any
    /// holds; by app, then in the order of `Resource`.
    public func holdings(of app: String?) -> [Holding] {
        var rows: [Holding] = []
        for resource in Resource.allCases {
            if let quota = quotas[resource] {
                rows += Self.holdings(of: app, resource, quota)
            } else if let book = shown[resource]?.book {
                rows += book.holdings(resource, of: app)
            }
        }
        let order = Dictionary(uniqueKeysWithValues: Resource.allCases.enumerated().map { ($1, $0) })
        return rows.sorted { ($0.app, order[$0.resource]!) < ($1.app, order[$1.resource]!) }
    }

    static func holdings(of app: String?, _ resource: Resource, _ quota: FairQuota) -> [Holding] {
        (app.map { [$0] } ?? quota.apps).map { app in
            Holding(
                app: app, resource: resource, held: UInt64(quota.held(byApp: app)),
                share: UInt64(quota.share(ofApp: app)), budget: UInt64(quota.budget), limit: UInt64(quota.limit))
        }
    }

    /// The rows of a ledger of bytes, from what each leaf holds (`usage`; "" for what no app
    /// holds, left out), whose budget and limit are its capacity: shares as its fair eviction
    /// takes them (`OwnerLedger`).
    static func holdings(of app: String?, _ resource: Resource, usage: [String: UInt64], capacity: UInt64)
        -> [Holding]
    {
        var byApp: [String: UInt64] = [:]
        for (leaf, bytes) in usage where !leaf.isEmpty {
            byApp[String(ClientIdentity.app(ofLeaf: leaf)), default: 0] += bytes
        }
        return (app.map { [$0] } ?? Array(byApp.keys)).map { app in
            let apps = byApp.count + (byApp[app] == nil ? 1 : 0)
            return Holding(
                app: app, resource: resource, held: byApp[app] ?? 0,
                share: FairShare.of(capacity, apps: apps, leaves: 1), budget: capacity, limit: capacity)
        }
    }
}

/// A room that keeps a budget of its own (bytes it holds for apps, evicted or paused by the same
/// share rule) and shows it in the agent's accounts.
protocol AccountBook: AnyObject {
    /// What `app` holds of `resource`, or every app holding any when nil.
    func holdings(_ resource: AgentAccounts.Resource, of app: String?) -> [AgentAccounts.Holding]
}
