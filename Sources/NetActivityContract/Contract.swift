// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// The hand-written side of the contract's names: what `Names.swift` (generated from dbus/*.xml by
// scripts/gen-contract.py) cannot say as a table.

/// A key of a dictionary of the contract (an `a{sv}` argument, a dictionary property), with the
/// D-Bus type its value has.
public protocol DictionaryKey: RawRepresentable, CaseIterable, Sendable where RawValue == String {
    var signature: String { get }
}

/// A key of a method's `a{sv}` options argument: unknown keys and wrong types are InvalidArgs.
public protocol MethodOption: DictionaryKey {}

extension ActivityMember {
    /// Why `id` is not a valid `desktop-id` (a desktop file name such as `org.example.App.desktop`:
    /// letters, digits, '.', '_', '-', at most 255 bytes), or nil when it is.
    public static func desktopIDProblem(_ id: String) -> String? {
        let allowed = { (c: UInt8) in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E || c == 0x5F
                || c == 0x2D
        }
        if id.utf8.count <= 255, id.hasSuffix(".desktop"), id.utf8.count > 8, id.utf8.allSatisfy(allowed) { return nil }
        return
            "BeginTask option 'desktop-id' must be a desktop file name like 'org.example.App.desktop' (letters, digits, '.', '_', '-'; at most 255 bytes), got '\(id.prefix(300))'"
    }
}

extension NetActivityError.Name {
    /// The prefix of the agent's own error names.
    public static let agentPrefix = NetActivityBus.name + ".Error."

    /// The last part of the name (`TooLarge` for `org.example.NetActivity.Error.TooLarge`).
    public var shortName: String { String(rawValue[rawValue.index(after: rawValue.lastIndex(of: ".")!)...]) }
}

extension DownloaderMember.Priority: Comparable {
    /// Its place in the contract's list: very-low is 0, very-high 4.
    public var rank: Int {
        switch self {
        case .veryLow: 0
        case .low: 1
        case .normal: 2
        case .high: 3
        case .veryHigh: 4
        }
    }

    public static func < (a: Self, b: Self) -> Bool { a.rank < b.rank }
}

// MARK: the members as the XML declares them

/// One argument of a method or signal: its name and D-Bus type, as the XML gives them.
public struct ContractArgument: Sendable, Equatable {
    public let name: String
    public let signature: String

    public init(_ name: String, _ signature: String) {
        self.name = name
        self.signature = signature
    }
}

/// A method of the contract, with its arguments.
public protocol ContractMethod: RawRepresentable, CaseIterable, Sendable where RawValue == String {
    var inArguments: [ContractArgument] { get }
    var outArguments: [ContractArgument] { get }
}

/// How a property announces a change (`org.freedesktop.DBus.Property.EmitsChangedSignal`).
public enum ContractEmitsChanged: String, Sendable {
    /// PropertiesChanged with the new value.
    case `true`
    /// PropertiesChanged naming it, without the value: each reader gets its own.
    case invalidates
    /// It never changes.
    case const
    /// No signal: read it when needed.
    case `false`
}

/// A property of the contract: its type, whether it can be set, how it announces a change.
public protocol ContractProperty: RawRepresentable, CaseIterable, Sendable where RawValue == String {
    var signature: String { get }
    var isWritable: Bool { get }
    var emitsChanged: ContractEmitsChanged { get }
}

/// A signal of the contract, with its arguments.
public protocol ContractSignal: Sendable {
    var rawValue: String { get }
    var arguments: [ContractArgument] { get }
}

/// One interface of the contract: its name and its members.
public protocol ContractInterface {
    associatedtype Method: ContractMethod
    associatedtype Property: ContractProperty
    static var interface: NetActivityInterface { get }
    static var signals: [any ContractSignal] { get }
}
