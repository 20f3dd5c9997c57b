// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// A D-Bus value of any type, for variants, properties and generic tools.
///
/// Hot paths read and write typed values directly with `MessageReader`/`MessageWriter`;
/// this enum is for the places where the type is only known at run time.
public indirect enum DBusValue: Sendable, Equatable, CustomStringConvertible {
    case byte(UInt8)
    case bool(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// A file descriptor to send (the writer duplicates it; the caller keeps its own). Values
    /// read by `MessageReader.readValue` carry -1: received descriptors are taken with `readFD`.
    case unixFD(Int32)
    /// `ay`, kept as bytes for speed.
    case bytes([UInt8])
    /// An array whose elements all have `elementSignature`.
    case array(elementSignature: String, [DBusValue])
    /// `a{..}`; keys are basic values.
    case dict(keySignature: String, valueSignature: String, [(DBusValue, DBusValue)])
    case structure([DBusValue])
    case variant(DBusValue)

    public var signature: String {
        switch self {
        case .byte: "y"
        case .bool: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .unixFD: "h"
        case .bytes: "ay"
        case .array(let element, _): "a" + element
        case .dict(let k, let v, _): "a{" + k + v + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .variant: "v"
        }
    }

    public static func == (a: DBusValue, b: DBusValue) -> Bool {
        switch (a, b) {
        case (.byte(let x), .byte(let y)): x == y
        case (.bool(let x), .bool(let y)): x == y
        case (.int16(let x), .int16(let y)): x == y
        case (.uint16(let x), .uint16(let y)): x == y
        case (.int32(let x), .int32(let y)): x == y
        case (.uint32(let x), .uint32(let y)): x == y
        case (.int64(let x), .int64(let y)): x == y
        case (.uint64(let x), .uint64(let y)): x == y
        case (.double(let x), .double(let y)): x == y || (x.isNaN && y.isNaN)
        case (.string(let x), .string(let y)): x == y
        case (.objectPath(let x), .objectPath(let y)): x == y
        case (.signature(let x), .signature(let y)): x == y
        case (.unixFD(let x), .unixFD(let y)): x == y
        case (.bytes(let x), .bytes(let y)): x == y
        case (.array(let s1, let x), .array(let s2, let y)): s1 == s2 && x == y
        case (.dict(let k1, let v1, let x), .dict(let k2, let v2, let y)):
            k1 == k2 && v1 == v2 && x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.structure(let x), .structure(let y)): x == y
        case (.variant(let x), .variant(let y)): x == y
        default: false
        }
    }

    public var description: String {
        switch self {
        case .byte(let v): "\(v)"
        case .bool(let v): "\(v)"
        case .int16(let v): "\(v)"
        case .uint16(let v): "\(v)"
        case .int32(let v): "\(v)"
        case .uint32(let v): "\(v)"
        case .int64(let v): "\(v)"
        case .uint64(let v): "\(v)"
        case .double(let v): "\(v)"
        case .string(let v): "\"\(v)\""
        case .objectPath(let v): v
        case .signature(let v): v
        case .unixFD(let v): "fd \(v)"
        case .bytes(let v): "\(v.count) bytes"
        case .array(_, let v): "[" + v.map(\.description).joined(separator: ", ") + "]"
        case .dict(_, _, let v): "{" + v.map { "\($0.0): \($0.1)" }.joined(separator: ", ") + "}"
        case .structure(let v): "(" + v.map(\.description).joined(separator: ", ") + ")"
        case .variant(let v): "<\(v)>"
        }
    }

    // Convenience accessors (nil when the case differs).
    public var boolValue: Bool? { if case .bool(let v) = self { v } else { nil } }
    public var stringValue: String? {
        switch self {
        case .string(let v), .objectPath(let v), .signature(let v): v
        default: nil
        }
    }
    public var doubleValue: Double? { if case .double(let v) = self { v } else { nil } }
    public var uint32Value: UInt32? { if case .uint32(let v) = self { v } else { nil } }
    public var uint64Value: UInt64? { if case .uint64(let v) = self { v } else { nil } }
    public var bytesValue: [UInt8]? { if case .bytes(let v) = self { v } else { nil } }
    /// The value inside a variant, or the value itself.
    public var unwrapped: DBusValue { if case .variant(let v) = self { v.unwrapped } else { self } }
    /// Elements of an array (or of `ay`, as bytes).
    public var arrayElements: [DBusValue]? {
        switch self {
        case .array(_, let v): v
        case .bytes(let b): b.map { .byte($0) }
        default: nil
        }
    }
    /// An `a{sv}` or any string-keyed dict as a Swift dictionary.
    public var stringDict: [String: DBusValue]? {
        guard case .dict(_, _, let entries) = self else { return nil }
        var out: [String: DBusValue] = [:]
        for (k, v) in entries {
            if let key = k.stringValue { out[key] = v.unwrapped }
        }
        return out
    }
}

extension DBusValue {
    /// Whether a file descriptor is anywhere inside (only libdbus can attach one).
    var containsFD: Bool {
        switch self {
        case .unixFD: true
        case .array(_, let items): items.contains { $0.containsFD }
        case .dict(_, _, let entries): entries.contains { $0.0.containsFD || $0.1.containsFD }
        case .structure(let fields): fields.contains { $0.containsFD }
        case .variant(let inner): inner.containsFD
        default: false
        }
    }
}
