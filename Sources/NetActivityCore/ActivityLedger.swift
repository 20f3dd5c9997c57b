// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// Who holds how much activity: per-client explicit counts, leases and tasks, keyed by the
/// client's unique bus name. The total drives the state machine.
///
/// Records live while the client is on the bus (so a client that alternates increment and
/// decrement is looked up once), and go when it leaves.
public struct ActivityLedger: Sendable {
    public struct Client: Sendable, Equatable {
        public var count: UInt32 = 0
        public var leases: UInt32 = 0
        public var tasks: UInt32 = 0
        public var processName: String = ""
        public var total: UInt64 { UInt64(count) + UInt64(leases) + UInt64(tasks) }
    }

    public enum Source: Sendable { case count, lease, task }

    public struct LimitError: Error, Equatable, Sendable {
        public let source: Source
        public let limit: UInt32
        public init(source: Source, limit: UInt32) {
            self.source = source
            self.limit = limit
        }
    }

    /// The most of each source one client may hold. Counts cost the agent nothing but a number,
    /// so the ledger caps them; leases and tasks are unlimited here, since the agent's accounts
    /// keep their budgets with the shares of apps (a ledger used alone may cap them too).
    public struct Limits: Sendable {
        public var count: UInt32 = 1_000_000
        public var lease: UInt32 = .max
        public var task: UInt32 = .max

        public subscript(source: Source) -> UInt32 {
            get {
                switch source {
                case .count: count
                case .lease: lease
                case .task: task
                }
            }
            set {
                switch source {
                case .count: count = newValue
                case .lease: lease = newValue
                case .task: task = newValue
                }
            }
        }
    }

    public private(set) var clients: [String: Client] = [:]
    public private(set) var total: UInt64 = 0
    public var limits = Limits()
    /// The record of the client that counted last: a client calling again (the usual case)
    /// costs a string comparison, not a hash. Dropped by anything that adds or removes a key.
    private var recent: (client: String, index: [String: Client].Index)?

    private mutating func index(of client: String) -> [String: Client].Index? {
        if let recent, recent.client == client { return recent.index }
        guard let i = clients.index(forKey: client) else { return nil }
        recent = (client, i)
        return i
    }

    public init() {}

    /// Adds one of `source` for `client`; throws when the client is at its limit. Returns true
    /// when the client had no record (so the caller can look up its process name once). One
    /// hash lookup at most: this runs on every IncrementActivityCount.
    @discardableResult
    public mutating func add(_ source: Source, for client: String) throws(LimitError) -> Bool {
        let limit = limits[source]
        if let i = index(of: client) {
            try Self.add(source, limit: limit, to: &clients.values[i])
            total += 1
            return false
        }
        var record = Client()
        try Self.add(source, limit: limit, to: &record)
        recent = nil
        clients[client] = record
        total += 1
        return true
    }

    private static func add(_ source: Source, limit: UInt32, to record: inout Client) throws(LimitError) {
        switch source {
        case .count:
            guard record.count < limit else { throw LimitError(source: source, limit: limit) }
            record.count += 1
        case .lease:
            guard record.leases < limit else { throw LimitError(source: source, limit: limit) }
            record.leases += 1
        case .task:
            guard record.tasks < limit else { throw LimitError(source: source, limit: limit) }
            record.tasks += 1
        }
    }

    /// Removes one of `source` for `client`. Never goes below zero; returns false when there was
    /// nothing to remove (AFNetworking's clamp).
    @discardableResult
    public mutating func remove(_ source: Source, for client: String) -> Bool {
        guard let i = index(of: client), Self.remove(source, from: &clients.values[i]) else { return false }
        total -= 1
        return true
    }

    private static func remove(_ source: Source, from record: inout Client) -> Bool {
        switch source {
        case .count:
            guard record.count > 0 else { return false }
            record.count -= 1
        case .lease:
            guard record.leases > 0 else { return false }
            record.leases -= 1
        case .task:
            guard record.tasks > 0 else { return false }
            record.tasks -= 1
        }
        return true
    }

    /// Makes sure a record exists (returns true when it is new, so the caller can look up the
    /// process name once).
    public mutating func touch(_ client: String) -> Bool {
        guard clients[client] == nil else { return false }
        recent = nil
        clients[client] = Client()
        return true
    }

    public mutating func setProcessName(_ name: String, for client: String) {
        clients[client]?.processName = name
    }

    /// Drops everything `client` held; returns what it held.
    @discardableResult
    public mutating func removeClient(_ client: String) -> Client? {
        recent = nil
        guard let record = clients.removeValue(forKey: client) else { return nil }
        total -= record.total
        return record
    }

    public func count(of client: String) -> UInt64 { clients[client]?.total ?? 0 }

    /// Clients holding any activity, ordered by name: (unique name, process name, total).
    public var activeClients: [(name: String, processName: String, count: UInt32)] {
        clients.filter { $0.value.total > 0 }
            .map { ($0.key, $0.value.processName, UInt32(clamping: $0.value.total)) }
            .sorted { $0.name < $1.name }
    }
}
