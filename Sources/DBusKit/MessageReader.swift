// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus
import Glibc

/// Reads the arguments of a message in order. Every read checks the type on the wire first, so a
/// mismatch is an `InvalidArgs` error, never a crash.
public struct MessageReader {
    let message: Message
    var iter: DBusMessageIter

    init(message: Message) {
        self.message = message
        iter = cdbus_iter_init()
        _ = dbus_message_iter_init(message.raw, &iter)
    }

    private init(message: Message, iter: DBusMessageIter) {
        self.message = message
        self.iter = iter
    }

    /// The type code of the next argument, `0` at the end.
    public mutating func peekType() -> Int32 { dbus_message_iter_get_arg_type(&iter) }
    public mutating func isAtEnd() -> Bool { peekType() == CDBUS_TYPE_INVALID }

    /// The signature of the next complete value (e.g. `a{sv}`).
    public mutating func peekSignature() -> String {
        guard let p = dbus_message_iter_get_signature(&iter) else { return "" }
        defer { dbus_free(p) }
        return String(cString: p)
    }

    private mutating func expect(_ code: Int32) throws(DBusError) {
        let got = peekType()
        guard got == code else {
            throw .invalidArgs("Expected an argument of type \(typeName(code)), got \(typeName(got))")
        }
    }

    public mutating func read<T: DBusBasicValue>(_: T.Type = T.self) throws(DBusError) -> T {
        try expect(T.typeCode)
        let v = withUnsafeMutablePointer(to: &iter) { T._read($0) }
        dbus_message_iter_next(&iter)
        return v
    }

    public mutating func readObjectPath() throws(DBusError) -> String {
        try expect(CDBUS_TYPE_OBJECT_PATH)
        let v = withUnsafeMutablePointer(to: &iter) { String._read($0) }
        dbus_message_iter_next(&iter)
        return v
    }

    public mutating func readSignature() throws(DBusError) -> String {
        try expect(CDBUS_TYPE_SIGNATURE)
        let v = withUnsafeMutablePointer(to: &iter) { String._read($0) }
        dbus_message_iter_next(&iter)
        return v
    }

    /// A received file descriptor. The caller owns it and must close it.
    public mutating func readFD() throws(DBusError) -> Int32 {
        try expect(CDBUS_TYPE_UNIX_FD)
        var fd: Int32 = -1
        dbus_message_iter_get_basic(&iter, &fd)
        dbus_message_iter_next(&iter)
        return fd
    }

    /// An `ay` in one copy.
    public mutating func readBytes() throws(DBusError) -> [UInt8] {
        try withBytes { Array($0.bindMemory(to: UInt8.self)) }
    }

    /// Lends an `ay` in place (no copy); the buffer is valid only inside `body`.
    public mutating func withBytes<T>(_ body: (UnsafeRawBufferPointer) throws(DBusError) -> T) throws(DBusError) -> T {
        try expect(CDBUS_TYPE_ARRAY)
        guard dbus_message_iter_get_element_type(&iter) == CDBUS_TYPE_BYTE else {
            throw .invalidArgs("Expected a byte array, got '\(peekSignature())'")
        }
        var sub = cdbus_iter_init()
        dbus_message_iter_recurse(&iter, &sub)
        var ptr: UnsafeRawPointer? = nil
        var count: Int32 = 0
        dbus_message_iter_get_fixed_array(&sub, &ptr, &count)
        let result = try body(UnsafeRawBufferPointer(start: count > 0 ? ptr : nil, count: Int(max(0, count))))
        dbus_message_iter_next(&iter)
        return result
    }

    /// Steps into the container at the cursor (array, struct, dict entry or variant) and moves
    /// past it. Read the container's contents from the returned reader.
    public mutating func enter(_ containerType: Int32) throws(DBusError) -> MessageReader {
        try expect(containerType)
        var sub = cdbus_iter_init()
        dbus_message_iter_recurse(&iter, &sub)
        dbus_message_iter_next(&iter)
        return MessageReader(message: message, iter: sub)
    }

    public mutating func enterArray() throws(DBusError) -> MessageReader { try enter(CDBUS_TYPE_ARRAY) }
    public mutating func enterStruct() throws(DBusError) -> MessageReader { try enter(CDBUS_TYPE_STRUCT) }
    public mutating func enterDictEntry() throws(DBusError) -> MessageReader { try enter(CDBUS_TYPE_DICT_ENTRY) }

    /// Steps into a variant, returning the signature of what it holds and a reader on it.
    public mutating func enterVariant() throws(DBusError) -> (signature: String, reader: MessageReader) {
        var sub = try enter(CDBUS_TYPE_VARIANT)
        return (sub.peekSignature(), sub)
    }

    /// An `a{sv}` as a dictionary (later keys win).
    public mutating func readVardict() throws(DBusError) -> [String: DBusValue] {
        guard peekSignature() == "a{sv}" else {
            throw .invalidArgs("Expected a{sv}, got '\(peekSignature())'")
        }
        var array = try enterArray()
        var out: [String: DBusValue] = [:]
        while !array.isAtEnd() {
            var entry = try array.enterDictEntry()
            let key = try entry.read(String.self)
            out[key] = try entry.readValue().unwrapped
        }
        return out
    }

    /// An `as`.
    public mutating func readStrings() throws(DBusError) -> [String] {
        guard peekSignature() == "as" else {
            throw .invalidArgs("Expected as, got '\(peekSignature())'")
        }
        var array = try enterArray()
        var out: [String] = []
        while !array.isAtEnd() { out.append(try array.read(String.self)) }
        return out
    }

    /// The next value whatever its type. File descriptors in it are closed (`.unixFD(-1)`).
    public mutating func readValue() throws(DBusError) -> DBusValue {
        switch peekType() {
        case CDBUS_TYPE_BYTE: return .byte(try read())
        case CDBUS_TYPE_BOOLEAN: return .bool(try read())
        case CDBUS_TYPE_INT16: return .int16(try read())
        case CDBUS_TYPE_UINT16: return .uint16(try read())
        case CDBUS_TYPE_INT32: return .int32(try read())
        case CDBUS_TYPE_UINT32: return .uint32(try read())
        case CDBUS_TYPE_INT64: return .int64(try read())
        case CDBUS_TYPE_UINT64: return .uint64(try read())
        case CDBUS_TYPE_DOUBLE: return .double(try read())
        case CDBUS_TYPE_STRING: return .string(try read())
        case CDBUS_TYPE_OBJECT_PATH: return .objectPath(try readObjectPath())
        case CDBUS_TYPE_SIGNATURE: return .signature(try readSignature())
        case CDBUS_TYPE_UNIX_FD:
            // libdbus hands out a duplicate. A generic value is for inspection, and a descriptor
            // nobody asked for (a client can put one in any variant) would leak: close it at once.
            // Take descriptors with readFD().
            let fd = try readFD()
            if fd >= 0 { close(fd) }
            return .unixFD(-1)
        case CDBUS_TYPE_VARIANT:
            var (_, sub) = try enterVariant()
            return .variant(try sub.readValue())
        case CDBUS_TYPE_STRUCT:
            var sub = try enterStruct()
            var fields: [DBusValue] = []
            while !sub.isAtEnd() { fields.append(try sub.readValue()) }
            return .structure(fields)
        case CDBUS_TYPE_ARRAY:
            let element = String(peekSignature().dropFirst())
            if element == "y" { return .bytes(try readBytes()) }
            var sub = try enterArray()
            if element.hasPrefix("{") {
                let inner = element.dropFirst().dropLast()
                let key = String(inner.prefix(1))
                let value = String(inner.dropFirst())
                var entries: [(DBusValue, DBusValue)] = []
                while !sub.isAtEnd() {
                    var entry = try sub.enterDictEntry()
                    let k = try entry.readValue()
                    let v = try entry.readValue()
                    entries.append((k, v))
                }
                return .dict(keySignature: key, valueSignature: value, entries)
            }
            var items: [DBusValue] = []
            while !sub.isAtEnd() { items.append(try sub.readValue()) }
            return .array(elementSignature: element, items)
        case CDBUS_TYPE_INVALID:
            throw .invalidArgs("Expected another argument, got nothing")
        default:
            throw .invalidArgs("Unsupported type \(typeName(peekType()))")
        }
    }

    /// Every remaining argument.
    public mutating func readAll() throws(DBusError) -> [DBusValue] {
        var out: [DBusValue] = []
        while !isAtEnd() { out.append(try readValue()) }
        return out
    }
}
