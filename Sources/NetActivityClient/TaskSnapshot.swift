// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import NetActivityContract

/// What a task looks like at one moment.
public struct TaskSnapshot: Sendable, Equatable {
    public enum State: String, Sendable { case running, suspended, completed }

    public var state: State
    public var description: String
    /// The task's object path at the agent; nil while no agent holds it (not yet, or restarting).
    public var path: String?
    /// The unique bus name of the client that began it.
    public var owner: String
    public var countOfBytesSent: UInt64
    public var countOfBytesExpectedToSend: UInt64
    public var countOfBytesReceived: UInt64
    public var countOfBytesExpectedToReceive: UInt64
    public var fractionCompleted: Double
    /// Empty unless the task completed with an error.
    public var error: String

    init(record: TaskRecord, path: String?) {
        state = State(rawValue: record.state.rawValue) ?? .running
        description = record.description
        self.path = path
        owner = record.owner
        countOfBytesSent = record.progress.sent
        countOfBytesExpectedToSend = record.progress.expectedToSend
        countOfBytesReceived = record.progress.received
        countOfBytesExpectedToReceive = record.progress.expectedToReceive
        fractionCompleted = record.fractionCompleted
        self.error = record.error
    }
}

extension TaskSnapshot {
    /// A task as another client sees it: from its `org.example.NetActivity.Task` properties.
    init(path: String, properties: [String: DBusValue]) {
        state = .running
        description = ""
        self.path = path
        owner = ""
        countOfBytesSent = 0
        countOfBytesExpectedToSend = 0
        countOfBytesReceived = 0
        countOfBytesExpectedToReceive = 0
        fractionCompleted = 0
        error = ""
        apply(properties)
    }

    /// Applies the properties present in `p` (all of them, or a PropertiesChanged).
    mutating func apply(_ p: [String: DBusValue]) {
        if let v = p[TaskMember.Property.state.rawValue]?.stringValue.flatMap(State.init(rawValue:)) { state = v }
        if let v = p[TaskMember.Property.description.rawValue]?.stringValue { description = v }
        if let v = p[TaskMember.Property.owner.rawValue]?.stringValue { owner = v }
        if let v = p[TaskMember.Property.countOfBytesSent.rawValue]?.uint64Value { countOfBytesSent = v }
        if let v = p[TaskMember.Property.countOfBytesExpectedToSend.rawValue]?.uint64Value {
            countOfBytesExpectedToSend = v
        }
        if let v = p[TaskMember.Property.countOfBytesReceived.rawValue]?.uint64Value { countOfBytesReceived = v }
        if let v = p[TaskMember.Property.countOfBytesExpectedToReceive.rawValue]?.uint64Value {
            countOfBytesExpectedToReceive = v
        }
        if let v = p[TaskMember.Property.fractionCompleted.rawValue]?.doubleValue { fractionCompleted = v }
        if let v = p[TaskMember.Property.error.rawValue]?.stringValue { error = v }
    }
}
