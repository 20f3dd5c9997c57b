// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus
import Glibc

/// Appends arguments to a message. Values that libdbus would reject (an invalid object path or
/// signature, an element of the wrong type) are refused with `InvalidArgs` before they reach it,
/// because libdbus aborts the process on such input.
///
/// A message built here is marshalled in Swift (`WireBody`) and handed to libdbus whole when it
/// is sent or read; a file descriptor, which only libdbus can attach, turns the writer back to
/// libdbus's iterators after what was written so far (see `appendFD`).
public struct MessageWriter {
    let message: Message
    var iter: DBusMessageIter
    /// The body being marshalled here, or nil when appending through libdbus (`iter`).
    var wire: WireBody?

    init(message: Message, throughLibdbus: Bool = false) {
        self.message = message
        iter = cdbus_iter_init()
        wire = throughLibdbus ? nil : message.wireBodyForWriting()
        if wire == nil { dbus_message_iter_init_append(message.raw, &iter) }
    }

    private init(message: Message, iter: DBusMessageIter, wire: WireBody?) {
        self.message = message
        self.iter = iter
        self.wire = wire
    }

    /// Every append adds at most what it takes to `Message.bodyBound`, so that sending a message
    /// built here need not walk it to know it is within the bus's limits.
    private func grow(_ bytes: Int) {
        message.bodyBound &+= UInt64(bytes)
    }

    public mutating func append<T: DBusBasicValue>(_ value: T) {
        grow(value._wireBound)
        if wire != nil { return value._appendWire(to: &self) }
        withUnsafeMutablePointer(to: &iter) { value._append($0) }
    }

    public mutating func appendObjectPath(_ path: String) throws(DBusError) {
        guard DBusNames.isValidObjectPath(path) else { throw .invalidArgs("Invalid object path '\(path)'") }
        grow(path._wireBound)
        appendStringLike(path, type: CDBUS_TYPE_OBJECT_PATH)
    }

    public mutating func appendSignature(_ signature: String) throws(DBusError) {
        guard DBusNames.isValidSignature(signature) else { throw .invalidArgs("Invalid signature '\(signature)'") }
        grow(signature._wireBound)
        appendStringLike(signature, type: CDBUS_TYPE_SIGNATURE)
    }

    /// An `o` or a `g` whose validity the caller has checked.
    private mutating func appendStringLike(_ s: String, type: Int32) {
        guard let wire else { return DBusKit.appendStringLike(s, type: type, to: &iter) }
        if type == CDBUS_TYPE_SIGNATURE { wire.putSignature(s) } else { wire.putString(s, code: UInt8(ascii: "o")) }
    }

    /// Appends a file descriptor; libdbus keeps its own duplicate, so the caller still owns `fd`.
    public mutating func appendFD(_ fd: Int32) throws(DBusError) {
        guard fd >= 0, fcntl(fd, F_GETFD) != -1 else { throw .invalidArgs("Invalid file descriptor \(fd)") }
        try continueThroughLibdbus(for: "file descriptor \(fd)")
        var v = fd
        grow(8)
        guard dbus_message_iter_append_basic(&iter, CDBUS_TYPE_UNIX_FD, &v) != 0 else {
            throw .failed("Could not attach file descriptor \(fd)")
        }
    }

    /// Only libdbus can attach a file descriptor: a body marshalled here so far is handed to it,
    /// and the rest goes through its iterators. That is possible only between top-level values:
    /// a descriptor inside a container must come in a `DBusValue` (checked before it starts).
    private mutating func continueThroughLibdbus(for what: String) throws(DBusError) {
        guard let wire else { return }
        guard wire.depth == 0 else {
            throw .failed("A \(what) inside a container must be appended as part of a DBusValue")
        }
        guard message.finishWire() else { throw .failed("Could not marshal the message before the \(what)") }
        self.wire = nil
        dbus_message_iter_init_append(message.raw, &iter)
    }

    public mutating func appendBytes(_ bytes: UnsafeRawBufferPointer) throws(DBusError) {
        guard bytes.count <= Int(CDBUS_MAXIMUM_ARRAY_LENGTH) else {
            throw .limitsExceeded("A byte array of \(bytes.count) bytes exceeds the D-Bus limit of 64 MiB")
        }
        grow(bytes.count + 8)
        if let wire {
            wire.note(UInt8(ascii: "a"))
            wire.note(UInt8(ascii: "y"))
            wire.pad(to: 4)
            wire.putU32(UInt32(bytes.count))
            wire.bytes.append(contentsOf: bytes)
            wire.longestArray = max(wire.longestArray, bytes.count)
            return
        }
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
        if let wire { return try wireContainer(wire, type, signature, body) }
        var sub = cdbus_iter_init()
        if let signature {
            signature.withCString { _ = dbus_message_iter_open_container(&iter, type, $0, &sub) }
        } else {
            _ = dbus_message_iter_open_container(&iter, type, nil, &sub)
        }
        var inner = MessageWriter(message: message, iter: sub, wire: nil)
        do {
            try body(&inner)
        } catch {
            dbus_message_iter_abandon_container(&iter, &inner.iter)
            throw error
        }
        _ = dbus_message_iter_close_container(&iter, &inner.iter)
    }

    /// A container marshalled here. An array's or a variant's own signature describes what is
    /// inside, so only structs (and dict entries, which libdbus then refuses) at the top level add
    /// their members' codes to the body's signature.
    private mutating func wireContainer(
        _ wire: WireBody, _ type: Int32, _ signature: String?, _ body: (inout MessageWriter) throws -> Void
    ) rethrows {
        let mark = wire.mark
        var lengthAt = -1
        var elementsAt = 0
        switch type {
        case CDBUS_TYPE_ARRAY:
            let element = Array((signature ?? "").utf8)
            wire.note(UInt8(ascii: "a"))
            if wire.untracked == 0 { wire.signature.append(contentsOf: element) }
            wire.pad(to: 4)
            lengthAt = wire.bytes.count
            wire.putU32(0)
            wire.pad(to: WireBody.alignment(of: element.first ?? 0))
            elementsAt = wire.bytes.count
            wire.untracked += 1
        case CDBUS_TYPE_VARIANT:
            let contained = Array((signature ?? "").utf8)
            wire.note(UInt8(ascii: "v"))
            wire.putSignatureBytes(contained)
            wire.untracked += 1
        case CDBUS_TYPE_STRUCT:
            wire.note(UInt8(ascii: "("))
            wire.pad(to: 8)
        default:  // a dict entry: valid only inside an array, whose signature describes it
            wire.note(UInt8(ascii: "{"))
            wire.pad(to: 8)
        }
        wire.depth += 1
        do {
            try body(&self)
        } catch {
            wire.rollBack(to: mark)
            throw error
        }
        wire.depth -= 1
        switch type {
        case CDBUS_TYPE_ARRAY, CDBUS_TYPE_VARIANT:
            wire.untracked -= 1
        case CDBUS_TYPE_STRUCT:
            wire.note(UInt8(ascii: ")"))
        default:
            wire.note(UInt8(ascii: "}"))
        }
        if lengthAt >= 0 {
            wire.longestArray = max(wire.longestArray, wire.bytes.count - elementsAt)
            WireBody.set(UInt32(truncatingIfNeeded: wire.bytes.count - elementsAt), at: lengthAt, in: &wire.bytes)
        }
    }

    /// An array left open so that its elements can be appended over several turns of the loop (a
    /// large reply built in slices): append through `elements`, then `close`. Nothing else may be
    /// appended to the message meanwhile.
    public struct OpenArray {
        var parent: MessageWriter
        /// The writer inside the array: append elements with it.
        public var elements: MessageWriter
        let lengthAt: Int
        let elementsAt: Int
    }

    /// Opens an array of `elementSignature` here, to be filled through the result and closed with
    /// `close(_:)`.
    public mutating func openArray(elementSignature: String) -> OpenArray {
        grow(8 + elementSignature.utf8.count)
        guard let wire else {
            var parent = self
            var sub = cdbus_iter_init()
            elementSignature.withCString {
                _ = dbus_message_iter_open_container(&parent.iter, CDBUS_TYPE_ARRAY, $0, &sub)
            }
            return OpenArray(
                parent: parent, elements: MessageWriter(message: message, iter: sub, wire: nil), lengthAt: -1,
                elementsAt: -1)
        }
        let element = Array(elementSignature.utf8)
        wire.note(UInt8(ascii: "a"))
        if wire.untracked == 0 { wire.signature.append(contentsOf: element) }
        wire.pad(to: 4)
        let lengthAt = wire.bytes.count
        wire.putU32(0)
        wire.pad(to: WireBody.alignment(of: element.first ?? 0))
        wire.untracked += 1
        wire.depth += 1
        return OpenArray(parent: self, elements: self, lengthAt: lengthAt, elementsAt: wire.bytes.count)
    }

    /// Closes an array opened by `openArray`.
    public static func close(_ array: inout OpenArray) {
        guard let wire = array.parent.wire else {
            _ = dbus_message_iter_close_container(&array.parent.iter, &array.elements.iter)
            return
        }
        wire.depth -= 1
        wire.untracked -= 1
        wire.longestArray = max(wire.longestArray, wire.bytes.count - array.elementsAt)
        WireBody.set(
            UInt32(truncatingIfNeeded: wire.bytes.count - array.elementsAt), at: array.lengthAt, in: &wire.bytes)
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
        try append(
            .dict(
                keySignature: "s", valueSignature: "v",
                dict.sorted { $0.key < $1.key }.map {
                    (.string($0.key), .variant($0.value))
                }))
    }

    /// Any value, checked for validity first.
    public mutating func append(_ value: DBusValue) throws(DBusError) {
        try DBusValueCheck.validate(value)
        if wire != nil, value.containsFD { try continueThroughLibdbus(for: "value holding a file descriptor") }
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
            appendStringLike(v, type: CDBUS_TYPE_OBJECT_PATH)
        case .signature(let v):
            grow(v._wireBound)
            appendStringLike(v, type: CDBUS_TYPE_SIGNATURE)
        case .unixFD(let fd):
            try? appendFD(fd)
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
