// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus
import Glibc
import LinuxKit

/// One D-Bus message (a reference to a libdbus `DBusMessage`).
public final class Message: @unchecked Sendable {
    // @unchecked: a Message is handed between threads only whole, never mutated concurrently;
    // libdbus message refcounting is atomic.
    /// Changes while the connection lends the object (see `init(lending:)`), and when a body
    /// marshalled here is handed to libdbus (`finishWire`). Nil only for a signal made here
    /// whose header is still `pendingSignal`.
    @exclusivity(unchecked) private var stored: OpaquePointer?

    /// libdbus's message as it is (a body being marshalled here not included).
    private var _raw: OpaquePointer { stored ?? materialize() }

    /// A signal's header, kept here until the message is handed to libdbus, when it is written here
    /// with the body in one go: `dbus_message_new_signal` would validate the names again and build
    /// the header with its type writers, and setting a destination would rewrite it (the bench's
    /// instructions per call). Anything that needs libdbus's message before that makes it.
    private struct PendingSignal {
        let path: String
        let interface: String
        let member: String
        var destination: String?
    }

    @exclusivity(unchecked) private var pendingSignal: PendingSignal?

    private func materialize() -> OpaquePointer {
        let signal = pendingSignal!
        pendingSignal = nil
        let raw = dbus_message_new_signal(signal.path, signal.interface, signal.member)!
        if let destination = signal.destination { _ = dbus_message_set_destination(raw, destination) }
        stored = raw
        return raw
    }

    /// The libdbus message, with any body marshalled here handed to it first.
    var raw: OpaquePointer {
        if wire != nil { _ = finishWire() }
        return _raw
    }

    /// The body being marshalled here (see `WireBody`), until it is handed to libdbus.
    @exclusivity(unchecked) private var wire: WireBody?

    /// Takes over one reference.
    init(owning raw: OpaquePointer) { stored = raw }

    /// Made here with an empty body, so `bodyBound` covers its body.
    private init(built raw: OpaquePointer, bodyBound: UInt64 = 0) {
        stored = raw
        self.bodyBound = bodyBound
        isBuiltHere = true
    }

    /// For a message made by the factories below: at least its body's size (every
    /// `MessageWriter` append adds what it may take).
    var bodyBound: UInt64 = 0
    private var isBuiltHere = false

    /// Adds a reference.
    init(borrowing raw: OpaquePointer) {
        dbus_message_ref(raw)
        stored = raw
    }

    /// A message libdbus holds for the length of one dispatch, seen without a reference of its
    /// own (a reference costs two atomic operations, a wrapper an allocation: per call, they add
    /// up). The connection hands it to a handler, then calls `endLoan()`.
    init(lending raw: OpaquePointer) {
        stored = raw
        isLent = true
    }

    private var isLent = false

    /// Ends a loan: a message nobody else holds (the handler kept no reference) stays lent, to
    /// wrap the next message (`relend`); one that a handler kept takes a reference of its own
    /// and is an ordinary message from now on. Returns whether it may be lent again.
    func endLoan(heldElsewhere: Bool) -> Bool {
        guard isLent else { return false }
        if heldElsewhere {
            dbus_message_ref(_raw)
            isLent = false
            return false
        }
        return true
    }

    /// Wraps another lent message (only after `endLoan` said it may).
    func relend(_ raw: OpaquePointer) {
        precondition(isLent, "only a lent message is lent again")
        stored = raw
    }

    /// A signal made here, its header kept here until needed (see `PendingSignal`).
    private init(pendingSignal: PendingSignal) {
        self.pendingSignal = pendingSignal
        isBuiltHere = true
    }

    deinit {
        guard !isLent, let stored else { return }
        // A received message's descriptors are closed with it: on the closer's thread (see `Closer`).
        if !isBuiltHere, dbus_message_contains_unix_fds(stored) != 0 {
            Self.releaseOffThread([stored])
        } else {
            dbus_message_unref(stored)
        }
    }

    /// Drops one reference to each of `raws`, received messages that carry descriptors, on the
    /// closer's thread: the last reference closes them, and closing a file of a FUSE server waits
    /// for that server.
    static func releaseOffThread(_ raws: [OpaquePointer]) {
        let held = UncheckedSendable(raws)
        Closer.shared.run { for raw in held.value { dbus_message_unref(raw) } }
    }

    /// The body a new writer appends to: the one being marshalled here, or a new one for a
    /// message built here whose body is still empty; nil when libdbus's iterators must go on
    /// (a message received, or one whose body libdbus already holds).
    func wireBodyForWriting() -> WireBody? {
        #if _endian(little)
            if let wire { return wire }
            guard isBuiltHere, !isLent, stored == nil || dbus_message_get_signature(_raw).pointee == 0 else {
                return nil
            }
            let body = WireBody()
            wire = body
            return body
        #else
            return nil
        #endif
    }

    /// Hands the body marshalled here to libdbus: the header libdbus made, this body and its
    /// signature become one message, which libdbus loads (checking all of it, as it checks what
    /// it reads from a socket) and copies without a serial, for the connection to number. This
    /// wrapper then holds the new message. False when libdbus refused it (a fault of ours): the
    /// body is dropped and `wireRefused` says so (`Connection.send` then sends an error reply
    /// in place of a method return, and drops anything else).
    @discardableResult
    func finishWire() -> Bool {
        guard let body = wire else { return !wireRefused }
        wire = nil
        body.handedOver = true
        guard !body.bytes.isEmpty else { return true }  // libdbus's message is that already
        wireRefused = true
        let message: [UInt8]?
        if let signal = pendingSignal {
            message = WireBody.signalHeader(
                path: signal.path, interface: signal.interface, member: signal.member, destination: signal.destination
            ).withUnsafeBytes { body.message(header: $0) }
        } else {
            message = Self.withMarshalled(_raw) { body.message(header: $0) } ?? nil
        }
        guard let bytes = message else { return false }
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        let loaded = bytes.withUnsafeBytes { b in
            dbus_message_demarshal(b.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(b.count), &error)
        }
        guard let loaded else {
            dbus_error_free(&error)
            return false
        }
        let fresh = dbus_message_copy(loaded)
        dbus_message_unref(loaded)
        guard let fresh else { return false }
        if let stored { dbus_message_unref(stored) }
        stored = fresh
        pendingSignal = nil
        wireRefused = false
        return true
    }

    /// libdbus refused the body marshalled here: the message holds none of it.
    private(set) var wireRefused = false

    public enum Kind: Sendable, Equatable { case methodCall, methodReturn, error, signal, invalid }

    public var kind: Kind {
        switch dbus_message_get_type(_raw) {
        case CDBUS_MESSAGE_TYPE_METHOD_CALL: .methodCall
        case CDBUS_MESSAGE_TYPE_METHOD_RETURN: .methodReturn
        case CDBUS_MESSAGE_TYPE_ERROR: .error
        case CDBUS_MESSAGE_TYPE_SIGNAL: .signal
        default: .invalid
        }
    }

    public var path: String? { dbus_message_get_path(_raw).map { String(cString: $0) } }
    public var interface: String? { dbus_message_get_interface(_raw).map { String(cString: $0) } }
    public var member: String? { dbus_message_get_member(_raw).map { String(cString: $0) } }
    public var sender: String? { dbus_message_get_sender(_raw).map { String(cString: $0) } }
    public var destination: String? { dbus_message_get_destination(_raw).map { String(cString: $0) } }
    public var errorName: String? { dbus_message_get_error_name(_raw).map { String(cString: $0) } }
    public var signature: String { String(cString: dbus_message_get_signature(raw)) }
    // The header's fields live in libdbus's message from the start: reading them leaves a body
    // being marshalled here where it is.
    public var serial: UInt32 { dbus_message_get_serial(_raw) }
    public var replySerial: UInt32 { dbus_message_get_reply_serial(_raw) }
    public var noReplyExpected: Bool { dbus_message_get_no_reply(_raw) != 0 }

    /// Whether the body's signature equals `signature`, without making a Swift string.
    func hasSignature(_ signature: UnsafePointer<CChar>) -> Bool {
        strcmp(dbus_message_get_signature(raw), signature) == 0
    }

    /// The first string argument of an error reply, which by convention is its message.
    public var errorMessage: String {
        var reader = self.reader()
        return (try? reader.read(String.self)) ?? ""
    }

    /// Converts an error reply into a `DBusError`.
    public var asError: DBusError? {
        guard kind == .error else { return nil }
        return DBusError(name: errorName ?? DBUS_ERROR_FAILED, message: errorMessage)
    }

    public func reader() -> MessageReader { MessageReader(message: self) }
    public func writer() -> MessageWriter { MessageWriter(message: self) }
    /// A writer through libdbus's iterators even where the body could be marshalled here (tests
    /// compare the two).
    func libdbusWriter() -> MessageWriter { MessageWriter(message: self, throughLibdbus: true) }

    // MARK: factories (names are validated first: libdbus aborts on invalid ones)

    public static func methodCall(
        destination: String?, path: String, interface: String?, member: String
    ) throws(DBusError) -> Message {
        if let destination, !DBusNames.isValidBusName(destination) {
            throw .invalidArgs("Invalid bus name '\(destination)'")
        }
        guard DBusNames.isValidObjectPath(path) else { throw .invalidArgs("Invalid object path '\(path)'") }
        if let interface, !DBusNames.isValidInterface(interface) {
            throw .invalidArgs("Invalid interface name '\(interface)'")
        }
        guard DBusNames.isValidMember(member) else { throw .invalidArgs("Invalid member name '\(member)'") }
        guard let raw = dbus_message_new_method_call(destination, path, interface, member) else {
            throw .failed("Out of memory")
        }
        return Message(built: raw)
    }

    public static func signal(path: String, interface: String, member: String) throws(DBusError) -> Message {
        guard DBusNames.isValidObjectPath(path) else { throw .invalidArgs("Invalid object path '\(path)'") }
        guard DBusNames.isValidInterface(interface) else { throw .invalidArgs("Invalid interface name '\(interface)'") }
        guard DBusNames.isValidMember(member) else { throw .invalidArgs("Invalid member name '\(member)'") }
        return Message(pendingSignal: PendingSignal(path: path, interface: interface, member: member))
    }

    /// A method return for this call.
    public func makeReturn() -> Message {
        Message(built: newReturn())
    }

    /// A new method return to this call (one reference, ours).
    private func newReturn() -> OpaquePointer {
        ensureSerial()
        return dbus_message_new_method_return(raw)!
    }

    /// Makes this wrapper, a reply built here that nobody else holds, wrap a new reply to `call`
    /// (letting its old message go): the object server reuses its replies' wrappers.
    func becomeReturn(to call: Message) {
        precondition(isBuiltHere, "only a message built here is reused")
        let fresh = call.newReturn()
        dbus_message_unref(_raw)
        stored = fresh
        wire = nil
        wireRefused = false
        bodyBound = 0
    }

    /// A body known to be under 4 KiB, with no file descriptors: cheap to keep a while.
    var isSmallAndFDFree: Bool {
        isBuiltHere && bodyBound < 4096 && dbus_message_contains_unix_fds(raw) == 0
    }

    /// libdbus aborts when asked to reply to a message with no serial, which only a message that
    /// was never sent (built locally, as in tests) lacks.
    private func ensureSerial() {
        if dbus_message_get_serial(raw) == 0 { dbus_message_set_serial(raw, 1) }
    }

    /// An error reply for this call. An invalid error name becomes `Failed`.
    /// An upper bound on the bytes of this message's arguments (a few iterator steps: arrays are
    /// measured, not walked).
    public var argumentsBound: UInt64 {
        var longest: UInt64 = 0
        return cdbus_message_bound(raw, &longest)
    }

    public func makeError(_ error: DBusError) -> Message {
        let name = DBusNames.isValidErrorName(error.name) ? error.name : DBUS_ERROR_FAILED
        let text = error.message.replacingNUL()
        ensureSerial()
        return Message(built: dbus_message_new_error(raw, name, text)!, bodyBound: UInt64(text._wireBound))
    }

    /// What makes this message one the bus would punish its sender for (an array over 64 MiB, or a
    /// message of 128 MiB or more: dbus-daemon closes the sender's connection), or nil.
    public var busLimitViolation: String? {
        // Headers take at most a few KiB (names are bounded); keep 64 KiB for them. A body
        // known to be under 64 MiB less that holds no array over 64 MiB and makes no message of
        // 128 MiB: most replies and signals are known so, and need no walk.
        if isBuiltHere, bodyBound < UInt64(CDBUS_MAXIMUM_ARRAY_LENGTH) - 65536 { return nil }
        var longest: UInt64 = 0
        let bound: UInt64
        if let wire {  // known without handing it to libdbus, which would refuse it whole
            longest = UInt64(wire.longestArray)
            bound = UInt64(wire.bytes.count)
        } else {
            bound = cdbus_message_bound(raw, &longest)
        }
        if longest > UInt64(CDBUS_MAXIMUM_ARRAY_LENGTH) {
            return "an array of \(longest) bytes, over the D-Bus limit of \(CDBUS_MAXIMUM_ARRAY_LENGTH) bytes"
        }
        if bound + 65536 >= CDBUS_MAXIMUM_MESSAGE_LENGTH {
            return "about \(bound) bytes, over the D-Bus message limit of \(CDBUS_MAXIMUM_MESSAGE_LENGTH) bytes"
        }
        return nil
    }

    /// At least the bytes this message takes in the outgoing queue: its body's bound and 4 KiB
    /// for the header (whose names are at most 255 bytes each) when built here; else its size
    /// as a walk of it bounds it, and 64 KiB.
    var queuedBound: Int {
        if isBuiltHere { return Int(clamping: bodyBound) &+ 4096 }
        var longest: UInt64 = 0
        return Int(clamping: cdbus_message_bound(raw, &longest)) &+ 65536
    }

    /// `body` with `raw` as libdbus would send it, header and body; nil when libdbus could not.
    private static func withMarshalled<T>(_ raw: OpaquePointer, _ body: (UnsafeRawBufferPointer) -> T) -> T? {
        var bytes: UnsafeMutablePointer<CChar>?
        var count: Int32 = 0
        guard dbus_message_marshal(raw, &bytes, &count) != 0, let bytes else { return nil }
        defer { free(bytes) }
        return body(UnsafeRawBufferPointer(start: bytes, count: Int(count)))
    }

    /// The whole message as libdbus would send it (for tests).
    var marshalled: [UInt8] { Self.withMarshalled(raw) { Array($0) } ?? [] }

    /// The body's length on the wire (for tests of `bodyBound`).
    var wireBodyLength: Int {
        Self.withMarshalled(raw) { b in
            guard b.count >= 16 else { return -1 }
            let little = b[0] == UInt8(ascii: "l")
            var n = 0
            for i in 0..<4 { n |= Int(b[4 + i]) << (8 * (little ? i : 3 - i)) }
            return n
        } ?? -1
    }

    /// An error reply in place of this method return (same destination and reply serial), for a
    /// reply that could not be sent as built.
    func errorInPlace(_ error: DBusError) -> Message? {
        guard kind == .methodReturn, let raw = dbus_message_new(CDBUS_MESSAGE_TYPE_ERROR) else { return nil }
        let m = Message(built: raw)
        _ = dbus_message_set_error_name(raw, error.name)
        _ = dbus_message_set_reply_serial(raw, replySerial)
        if let destination { _ = dbus_message_set_destination(raw, destination) }
        dbus_message_set_no_reply(raw, 1)
        var w = m.writer()
        w.append(error.message.replacingNUL())
        return m
    }

    /// Sets the destination (for unicast signals). The name must be valid.
    // The header setters work on libdbus's message as it is: a body being marshalled here stays
    // where it is (and joins the header, with these fields, when it is handed over).
    public func setDestination(_ name: String) throws(DBusError) {
        guard DBusNames.isValidBusName(name) else { throw .invalidArgs("Invalid bus name '\(name)'") }
        if pendingSignal != nil { return pendingSignal!.destination = name }
        _ = dbus_message_set_destination(_raw, name)
    }

    /// Sets the sender (the bus does this for real messages; tests that hand calls to an object
    /// server directly set it themselves).
    public func setSender(_ name: String) { dbus_message_set_sender(_raw, name) }
    public func setAutoStart(_ on: Bool) { dbus_message_set_auto_start(_raw, on ? 1 : 0) }
    public func setNoReply(_ on: Bool) { dbus_message_set_no_reply(_raw, on ? 1 : 0) }
}

extension String {
    /// Strings with NUL cannot go on the wire; cut them at the first NUL as C would.
    func replacingNUL() -> String {
        guard let i = utf8.firstIndex(of: 0) else { return self }
        return String(self[..<i])
    }
}
