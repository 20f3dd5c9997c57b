internal import CDBus
import Glibc

/// Appends arguments to a message. Values that libdbus would reject (an invalid object path or
/// signature, an element of the wrong type) are refused with `InvalidArgs` before they reach it,
/// because libdbus aborts the process on such input.
public struct MessageWriter {
    let message: Message
    var iter: DBusMessageIter

    init(message: Message) {
        self.message = message
        iter = cdbus_iter_init()
        dbus_message_iter_init_append(message.raw, &iter)
    }

    private init(message: Message, iter: DBusMessageIter) {
        self.message = message
        self.iter = iter
    }

    /// Every append adds at most what it takes to `Message.bodyBound`, so that sending a message
    /// built here need not walk it to know it is within the bus's limits.
    private func grow(_ bytes: Int) {
        message.bodyBound &+= UInt64(bytes)
    }

    public mutating func append<T: DBusBasicValue>(_ value: T) {
        grow(value._wireBound)
        withUnsafeMutablePointer(to: &iter) { value._append($0) }
    }

    public mutating func appendObjectPath(_ path: String) throws(DBusError) {
        guard DBusNames.isValidObjectPath(path) else { throw .invalidArgs("Invalid object path '\(path)'") }
        grow(path._wireBound)
        appendStringLike(path, type: CDBUS_TYPE_OBJECT_PATH, to: &iter)
    }

    public mutating func appendSignature(_ signature: String) throws(DBusError) {
        guard DBusNames.isValidSignature(signature) else { throw .invalidArgs("Invalid signature '\(signature)'") }
        grow(signature._wireBound)
        appendStringLike(signature, type: CDBUS_TYPE_SIGNATURE, to: &iter)
    }

    /// Appends a file descriptor; libdbus keeps its own duplicate, so the caller still owns `fd`.
    public mutating func appendFD(_ fd: Int32) throws(DBusError) {
        guard fd >= 0, fcntl(fd, F_GETFD) != -1 else { throw .invalidArgs("Invalid file descriptor \(fd)") }
        var v = fd
        grow(8)
        guard dbus_message_iter_append_basic(&iter, CDBUS_TYPE_UNIX_FD, &v) != 0 else {
            throw .failed("Could not attach file descriptor \(fd)")
        }
    }

    public mutating func appendBytes(_ bytes: UnsafeRawBufferPointer) throws(DBusError) {
        guard bytes.count <= Int(CDBUS_MAXIMUM_ARRAY_LENGTH) else {
            throw .limitsExceeded("A byte array of \(bytes.count) bytes exceeds the D-Bus limit of 64 MiB")
        }
        grow(bytes.count + 8)
        var sub = cdbus_iter_init()
        _ = dbus_message_iter_open_container(&iter, CDBUS_TYPE_ARRAY, "y", &sub)
        var p: UnsafeRawPointer? = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)
        _ = dbus_message_iter_append_fixed_array(&sub, CDBUS_TYPE_BYTE, &p, Int32(bytes.count))
        _ = dbus_message_iter_close_container(&iter, &sub)
    }

    public mutating func appendBytes(_ bytes: [UInt8]) throws(DBusError) {
        do {
            try bytes.withUnsafeBytes { b in try appendBytes(b) }
        } catch let e as DBusError {
            throw e
        } catch {
            throw .failed("\(error)")
        }
    }

    private mutating func container(
        _ type: Int32, _ signature: String?, _ body: (inout MessageWriter) throws -> Void
    ) rethrows {
        // Length or signature, and padding to the elements' alignment.
        grow(8 + (signature?.utf8.count ?? 0))
        var sub = cdbus_iter_init()
        if let signature {
            signature.withCString { _ = dbus_message_iter_open_container(&iter, type, $0, &sub) }
        } else {
            _ = dbus_message_iter_open_container(&iter, type, nil, &sub)
        }
        var inner = MessageWriter(message: message, iter: sub)
        do {
            try body(&inner)
        } catch {
            dbus_message_iter_abandon_container(&iter, &inner.iter)
            throw error
        }
        _ = dbus_message_iter_close_container(&iter, &inner.iter)
    }

    /// An array of `elementSignature` (a trusted constant, e.g. `"(ssu)"`). The body appends elements.
    public mutating func appendArray(
        elementSignature: String, _ body: (inout MessageWriter) throws -> Void
    ) rethrows {
        try container(CDBUS_TYPE_ARRAY, elementSignature, body)
    }

    public mutating func appendStruct(_ body: (inout MessageWriter) throws -> Void) rethrows {
        try container(CDBUS_TYPE_STRUCT, nil, body)
    }

    public mutating func appendDictEntry(_ body: (inout MessageWriter) throws -> Void) rethrows {
        try container(CDBUS_TYPE_DICT_ENTRY, nil, body)
    }

    /// A variant holding one value of `signature` (a trusted constant). The body appends it.
    public mutating func appendVariant(signature: String, _ body: (inout MessageWriter) throws -> Void) rethrows {
        try container(CDBUS_TYPE_VARIANT, signature, body)
    }

    /// An `a{sv}` from a dictionary, keys sorted for a stable wire form.
    public mutating func appendVardict(_ dict: [String: DBusValue]) throws(DBusError) {
        try append(.dict(keySignature: "s", valueSignature: "v", dict.sorted { $0.key < $1.key }.map {
            (.string($0.key), .variant($0.value))
        }))
    }

    /// Any value, checked for validity first.
    public mutating func append(_ value: DBusValue) throws(DBusError) {
        try DBusValueCheck.validate(value)
        appendUnchecked(value)
    }

    private mutating func appendUnchecked(_ value: DBusValue) {
        switch value {
        case .byte(let v): append(v)
        case .bool(let v): append(v)
        case .int16(let v): append(v)
        case .uint16(let v): append(v)
        case .int32(let v): append(v)
        case .uint32(let v): append(v)
        case .int64(let v): append(v)
        case .uint64(let v): append(v)
        case .double(let v): append(v)
        case .string(let v): append(v)
        case .objectPath(let v):
            grow(v._wireBound)
            appendStringLike(v, type: CDBUS_TYPE_OBJECT_PATH, to: &iter)
        case .signature(let v):
            grow(v._wireBound)
            appendStringLike(v, type: CDBUS_TYPE_SIGNATURE, to: &iter)
        case .unixFD(let fd):
            grow(8)
            var v = fd
            _ = dbus_message_iter_append_basic(&iter, CDBUS_TYPE_UNIX_FD, &v)
        case .bytes(let b): try? appendBytes(b)
        case .array(let element, let items):
            appendArray(elementSignature: element) { w in for item in items { w.appendUnchecked(item) } }
        case .dict(let k, let v, let entries):
            appendArray(elementSignature: "{" + k + v + "}") { w in
                for (key, value) in entries {
                    w.appendDictEntry { e in
                        e.appendUnchecked(key)
                        e.appendUnchecked(value)
                    }
                }
            }
        case .structure(let fields):
            appendStruct { w in for f in fields { w.appendUnchecked(f) } }
        case .variant(let inner):
            appendVariant(signature: inner.signature) { w in w.appendUnchecked(inner) }
        }
    }
}

/// Checks a `DBusValue` against the rules libdbus enforces by aborting.
enum DBusValueCheck {
    static func validate(_ value: DBusValue, depth: Int = 0) throws(DBusError) {
        guard depth < 32 else { throw .invalidArgs("Value nested more than 32 levels deep") }
        switch value {
        case .objectPath(let p):
            guard DBusNames.isValidObjectPath(p) else { throw .invalidArgs("Invalid object path '\(p)'") }
        case .signature(let s):
            guard DBusNames.isValidSignature(s) else { throw .invalidArgs("Invalid signature '\(s)'") }
        case .unixFD(let fd):
            guard fd >= 0, fcntl(fd, F_GETFD) != -1 else { throw .invalidArgs("Invalid file descriptor \(fd)") }
        case .bytes(let b):
            guard b.count <= Int(CDBUS_MAXIMUM_ARRAY_LENGTH) else { throw .limitsExceeded("Byte array over 64 MiB") }
        case .array(let element, let items):
            guard DBusNames.isValidSingleSignature(element) else {
                throw .invalidArgs("Invalid array element signature '\(element)'")
            }
            for item in items {
                guard item.signature == element else {
                    throw .invalidArgs("Array of '\(element)' holds a '\(item.signature)'")
                }
                try validate(item, depth: depth + 1)
            }
        case .dict(let k, let v, let entries):
            guard DBusNames.isValidSingleSignature("a{" + k + v + "}") else {
                throw .invalidArgs("Invalid dict signature 'a{\(k)\(v)}'")
            }
            for (key, value) in entries {
                guard key.signature == k, value.signature == v else {
                    throw .invalidArgs("Dict a{\(k)\(v)} holds a '\(key.signature)' => '\(value.signature)' entry")
                }
                try validate(key, depth: depth + 1)
                try validate(value, depth: depth + 1)
            }
        case .structure(let fields):
            guard !fields.isEmpty else { throw .invalidArgs("Empty structures are not allowed") }
            for f in fields { try validate(f, depth: depth + 1) }
        case .variant(let inner):
            try validate(inner, depth: depth + 1)
        default:
            break
        }
    }
}
