// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus

/// A D-Bus basic type that maps onto a Swift type one to one.
public protocol DBusBasicValue {
    static var typeCode: Int32 { get }
    static var signature: String { get }
    /// Reads the value at `iter`, a `DBusMessageIter *` (whose type the caller has checked).
    static func _read(_ iter: UnsafeMutableRawPointer) -> Self
    /// Appends the value at `iter`, a `DBusMessageIter *`.
    func _append(_ iter: UnsafeMutableRawPointer)
    /// At most how many bytes the value takes in a message body, alignment included.
    var _wireBound: Int { get }
    /// Appends the value to a body marshalled in Swift (`WireBody`).
    func _appendWire(to writer: inout MessageWriter)
}

extension DBusBasicValue {
    public var _wireBound: Int { 8 }
}

/// The fixed-size types are read and written through their own bytes.
public protocol DBusFixedValue: DBusBasicValue {}
extension DBusFixedValue {
    public static func _read(_ iter: UnsafeMutableRawPointer) -> Self {
        withUnsafeTemporaryAllocation(of: UInt64.self, capacity: 1) { buf in
            buf[0] = 0
            dbus_message_iter_get_basic(it(iter), buf.baseAddress)
            return UnsafeRawPointer(buf.baseAddress!).loadUnaligned(as: Self.self)
        }
    }
    public func _append(_ iter: UnsafeMutableRawPointer) {
        withUnsafeBytes(of: self) { bytes in
            _ = dbus_message_iter_append_basic(it(iter), Self.typeCode, bytes.baseAddress)
        }
    }
    public func _appendWire(to writer: inout MessageWriter) {
        writer.wire!.putFixed(self, code: UInt8(truncatingIfNeeded: Self.typeCode))
    }
}

extension UInt8: DBusFixedValue {
    public static var typeCode: Int32 { CDBUS_TYPE_BYTE }
    public static var signature: String { "y" }
}
extension Int16: DBusFixedValue {
    public static var typeCode: Int32 { CDBUS_TYPE_INT16 }
    public static var signature: String { "n" }
}
extension UInt16: DBusFixedValue {
    public static var typeCode: Int32 { CDBUS_TYPE_UINT16 }
    public static var signature: String { "q" }
}
extension Int32: DBusFixedValue {
    public static var typeCode: Int32 { CDBUS_TYPE_INT32 }
    public static var signature: String { "i" }
}
extension UInt32: DBusFixedValue {
    public static var typeCode: Int32 { CDBUS_TYPE_UINT32 }
    public static var signature: String { "u" }
}
extension Int64: DBusFixedValue {
    public static var typeCode: Int32 { CDBUS_TYPE_INT64 }
    public static var signature: String { "x" }
}
extension UInt64: DBusFixedValue {
    public static var typeCode: Int32 { CDBUS_TYPE_UINT64 }
    public static var signature: String { "t" }
}
extension Double: DBusFixedValue {
    public static var typeCode: Int32 { CDBUS_TYPE_DOUBLE }
    public static var signature: String { "d" }
}

extension Bool: DBusBasicValue {
    public static var typeCode: Int32 { CDBUS_TYPE_BOOLEAN }
    public static var signature: String { "b" }
    public static func _read(_ iter: UnsafeMutableRawPointer) -> Bool {
        var v: dbus_bool_t = 0
        dbus_message_iter_get_basic(it(iter), &v)
        return v != 0
    }
    public func _append(_ iter: UnsafeMutableRawPointer) {
        var v: dbus_bool_t = self ? 1 : 0
        _ = dbus_message_iter_append_basic(it(iter), CDBUS_TYPE_BOOLEAN, &v)
    }
    public func _appendWire(to writer: inout MessageWriter) {
        writer.wire!.putFixed(UInt32(self ? 1 : 0), code: UInt8(ascii: "b"))
    }
}

extension String: DBusBasicValue {
    public static var typeCode: Int32 { CDBUS_TYPE_STRING }
    public static var signature: String { "s" }
    public static func _read(_ iter: UnsafeMutableRawPointer) -> String {
        var p: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(it(iter), &p)
        return p.map { String(cString: $0) } ?? ""
    }
    public func _append(_ iter: UnsafeMutableRawPointer) {
        // withCString stops at an embedded NUL, so what goes out is always a valid wire string.
        withCString { c in
            var p: UnsafePointer<CChar>? = c
            _ = dbus_message_iter_append_basic(it(iter), CDBUS_TYPE_STRING, &p)
        }
    }
    public func _appendWire(to writer: inout MessageWriter) {
        writer.wire!.putString(self, code: UInt8(ascii: "s"))
    }
    /// Length, bytes, NUL, and up to 3 bytes of padding before the length.
    public var _wireBound: Int { utf8.count + 8 }
}

/// Writes a string-like basic type (`o` or `g`) whose validity the caller has checked.
func appendStringLike(_ s: String, type: Int32, to iter: inout DBusMessageIter) {
    s.withCString { c in
        var p: UnsafePointer<CChar>? = c
        _ = dbus_message_iter_append_basic(&iter, type, &p)
    }
}

func typeName(_ code: Int32) -> String {
    code == CDBUS_TYPE_INVALID ? "nothing" : "'" + String(UnicodeScalar(UInt8(truncatingIfNeeded: code))) + "'"
}

@inline(__always)
func it(_ p: UnsafeMutableRawPointer) -> UnsafeMutablePointer<DBusMessageIter> {
    p.assumingMemoryBound(to: DBusMessageIter.self)
}
