internal import CDBus
import Glibc

/// One D-Bus message (a reference to a libdbus `DBusMessage`).
public final class Message: @unchecked Sendable {
    // @unchecked: a Message is handed between threads only whole, never mutated concurrently;
    // libdbus message refcounting is atomic.
    /// Changes only while the connection lends the object (see `init(lending:)`).
    private(set) var raw: OpaquePointer

    /// Takes over one reference.
    init(owning raw: OpaquePointer) { self.raw = raw }

    /// Made here with an empty body, so `bodyBound` covers its body.
    private init(built raw: OpaquePointer, bodyBound: UInt64 = 0) {
        self.raw = raw
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
        self.raw = raw
    }

    /// A message libdbus holds for the length of one dispatch, seen without a reference of its
    /// own (a reference costs two atomic operations, a wrapper an allocation: per call, they add
    /// up). The connection hands it to a handler, then calls `endLoan()`.
    init(lending raw: OpaquePointer) {
        self.raw = raw
        isLent = true
    }

    private var isLent = false

    /// Ends a loan: a message nobody else holds (the handler kept no reference) stays lent, to
    /// wrap the next message (`relend`); one that a handler kept takes a reference of its own
    /// and is an ordinary message from now on. Returns whether it may be lent again.
    func endLoan(heldElsewhere: Bool) -> Bool {
        guard isLent else { return false }
        if heldElsewhere {
            dbus_message_ref(raw)
            isLent = false
            return false
        }
        return true
    }

    /// Wraps another lent message (only after `endLoan` said it may).
    func relend(_ raw: OpaquePointer) {
        precondition(isLent, "only a lent message is lent again")
        self.raw = raw
    }

    deinit { if !isLent { dbus_message_unref(raw) } }

    public enum Kind: Sendable, Equatable { case methodCall, methodReturn, error, signal, invalid }

    public var kind: Kind {
        switch dbus_message_get_type(raw) {
        case CDBUS_MESSAGE_TYPE_METHOD_CALL: .methodCall
        case CDBUS_MESSAGE_TYPE_METHOD_RETURN: .methodReturn
        case CDBUS_MESSAGE_TYPE_ERROR: .error
        case CDBUS_MESSAGE_TYPE_SIGNAL: .signal
        default: .invalid
        }
    }

    public var path: String? { dbus_message_get_path(raw).map { String(cString: $0) } }
    public var interface: String? { dbus_message_get_interface(raw).map { String(cString: $0) } }
    public var member: String? { dbus_message_get_member(raw).map { String(cString: $0) } }
    public var sender: String? { dbus_message_get_sender(raw).map { String(cString: $0) } }
    public var destination: String? { dbus_message_get_destination(raw).map { String(cString: $0) } }
    public var errorName: String? { dbus_message_get_error_name(raw).map { String(cString: $0) } }
    public var signature: String { String(cString: dbus_message_get_signature(raw)) }
    public var serial: UInt32 { dbus_message_get_serial(raw) }
    public var replySerial: UInt32 { dbus_message_get_reply_serial(raw) }
    public var noReplyExpected: Bool { dbus_message_get_no_reply(raw) != 0 }

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
        return DBusError(name: errorName ?? "org.freedesktop.DBus.Error.Failed", message: errorMessage)
    }

    public func reader() -> MessageReader { MessageReader(message: self) }
    public func writer() -> MessageWriter { MessageWriter(message: self) }

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
        guard let raw = dbus_message_new_signal(path, interface, member) else { throw .failed("Out of memory") }
        return Message(built: raw)
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
        dbus_message_unref(raw)
        raw = fresh
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
    public func makeError(_ error: DBusError) -> Message {
        let name = DBusNames.isValidErrorName(error.name) ? error.name : "org.freedesktop.DBus.Error.Failed"
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
        let bound = cdbus_message_bound(raw, &longest)
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

    /// The body's length on the wire (for tests of `bodyBound`).
    var wireBodyLength: Int {
        var bytes: UnsafeMutablePointer<CChar>?
        var count: Int32 = 0
        guard dbus_message_marshal(raw, &bytes, &count) != 0, let bytes, count >= 16 else { return -1 }
        defer { free(bytes) }
        let b = UnsafeRawPointer(bytes).assumingMemoryBound(to: UInt8.self)
        let little = b[0] == UInt8(ascii: "l")
        var n = 0
        for i in 0..<4 { n |= Int(b[4 + i]) << (8 * (little ? i : 3 - i)) }
        return n
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
    public func setDestination(_ name: String) throws(DBusError) {
        guard DBusNames.isValidBusName(name) else { throw .invalidArgs("Invalid bus name '\(name)'") }
        _ = dbus_message_set_destination(raw, name)
    }

    /// Sets the sender (the bus does this for real messages; tests that hand calls to an object
    /// server directly set it themselves).
    public func setSender(_ name: String) { dbus_message_set_sender(raw, name) }
    public func setAutoStart(_ on: Bool) { dbus_message_set_auto_start(raw, on ? 1 : 0) }
    public func setNoReply(_ on: Bool) { dbus_message_set_no_reply(raw, on ? 1 : 0) }
}

extension String {
    /// Strings with NUL cannot go on the wire; cut them at the first NUL as C would.
    func replacingNUL() -> String {
        guard let i = utf8.firstIndex(of: 0) else { return self }
        return String(self[..<i])
    }
}
