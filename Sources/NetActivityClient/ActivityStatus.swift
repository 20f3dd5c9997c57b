// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit

/// The indicator's state as the agent reports it.
public struct ActivityStatus: Equatable, Sendable {
    public struct Client: Equatable, Sendable {
        public let busName: String
        public let processName: String
        public let count: UInt32
        /// Why it is busy: the reasons its open leases gave (`BeginActivity`), oldest first. A
        /// sandboxed app sees only its own app's.
        public internal(set) var reasons: [String] = []
    }

    public var visible = false
    public var state = "not-active"
    public var activityCount: UInt32 = 0
    public var enabled = true
    public var activationDelay = 1.0
    public var completionDelay = 0.17
    public var clients: [Client] = []
    public var version: UInt32 = 0
    /// `Reasons` as last read, by bus name (it arrives apart from `Clients`).
    private var reasons: [String: [String]] = [:]

    public init() {}

    /// Updates the fields named in an `a{sv}` of the agent's properties.
    mutating func apply(_ props: [String: DBusValue]) {
        if let v = props[ActivityMember.Property.visible.rawValue]?.boolValue { visible = v }
        if let v = props[ActivityMember.Property.state.rawValue]?.stringValue { state = v }
        if let v = props[ActivityMember.Property.activityCount.rawValue]?.uint32Value { activityCount = v }
        if let v = props[ActivityMember.Property.enabled.rawValue]?.boolValue { enabled = v }
        if let v = props[ActivityMember.Property.activationDelay.rawValue]?.doubleValue { activationDelay = v }
        if let v = props[ActivityMember.Property.completionDelay.rawValue]?.doubleValue { completionDelay = v }
        if let v = props[ActivityMember.Property.version.rawValue]?.uint32Value { version = v }
        if let list = props[ActivityMember.Property.clients.rawValue]?.arrayElements {
            clients = list.compactMap { item in
                guard case .structure(let f) = item, f.count == 3, let name = f[0].stringValue,
                    let process = f[1].stringValue, let count = f[2].uint32Value
                else { return nil }
                return Client(busName: name, processName: process, count: count, reasons: reasons[name] ?? [])
            }
        }
        if let given = props[ActivityMember.Property.reasons.rawValue]?.stringDict {
            reasons = given.compactMapValues { $0.arrayElements?.compactMap(\.stringValue) }
            for i in clients.indices { clients[i].reasons = reasons[clients[i].busName] ?? [] }
        }
    }
}
