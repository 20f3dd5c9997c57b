// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus
import Glibc

/// One argument of a method or signal, for introspection.
public struct DBusArgument: Sendable {
    public let name: String
    public let signature: String
    public init(_ name: String, _ signature: String) {
        self.name = name
        self.signature = signature
    }
}

/// One incoming method call: who sent it, its arguments, and the reply being built. The reader
/// and the writer are made when a handler first uses them (many calls have no arguments, or
/// reply with nothing).
public struct MethodCall {
    public let message: Message
    public let path: String
    public let sender: String
    let replyMessage: Message
    private var _args: MessageReader?
    private var _reply: MessageWriter?
    /// Set by `deferReply`: the handler's return sends nothing.
    public private(set) var isDeferred = false

    init(message: Message, path: String, sender: String, reply: Message) {
        self.message = message
        self.path = path
        self.sender = sender
        replyMessage = reply
    }

    public var args: MessageReader {
        get { _args ?? message.reader() }
        _modify {
            if _args == nil { _args = message.reader() }
            yield &_args!
        }
    }

    public var reply: MessageWriter {
        get { _reply ?? replyMessage.writer() }
        _modify {
            if _reply == nil { _reply = replyMessage.writer() }
            yield &_reply!
        }
    }

    /// The answer comes later: the handler returns without a reply, and whoever keeps `message`
    /// answers it once, with `ObjectServer.respond(to:)` or `replyError` (a handler that throws
    /// after this still answers with its error at once).
    public mutating func deferReply() {
        isDeferred = true
    }
}

/// A method in an interface table. The server checks the call's signature against `inSignature`
/// before the handler runs, so handlers read typed arguments without re-checking types.
public struct DBusMethod {
    /// One reference to hand around per call, not five.
    final class Storage {
        let name: String
        let inArgs: [DBusArgument]
        let outArgs: [DBusArgument]
        let inSignature: [CChar]
        let handler: (inout MethodCall) throws -> Void

        init(
            name: String, inArgs: [DBusArgument], outArgs: [DBusArgument],
            handler: @escaping (inout MethodCall) throws -> Void
        ) {
            self.name = name
            self.inArgs = inArgs
            self.outArgs = outArgs
            inSignature = Array(inArgs.map(\.signature).joined().utf8CString)
            self.handler = handler
        }
    }
    let storage: Storage

    public var name: String { storage.name }
    public var inArgs: [DBusArgument] { storage.inArgs }
    public var outArgs: [DBusArgument] { storage.outArgs }

    public init(
        _ name: String, in inArgs: [DBusArgument] = [], out outArgs: [DBusArgument] = [],
        _ handler: @escaping (inout MethodCall) throws -> Void
    ) {
        storage = Storage(name: name, inArgs: inArgs, outArgs: outArgs, handler: handler)
    }

    init(storage: Storage) { self.storage = storage }

    var inSignatureString: String { inArgs.map(\.signature).joined() }
}

/// A property in an interface table.
public struct DBusProperty {
    public enum Access: String, Sendable { case read, readwrite }
    /// `org.freedesktop.DBus.Property.EmitsChangedSignal`.
    public enum EmitsChanged: String, Sendable { case `true`, invalidates, const, `false` }

    public let name: String
    public let signature: String
    public let access: Access
    public let emitsChanged: EmitsChanged
    /// Writes the current value (not wrapped in a variant) for the object at `path`.
    let get: (_ writer: inout MessageWriter, _ path: String) throws -> Void
    /// Reads the new value from inside the variant (whose signature the server has checked).
    let set: ((_ reader: inout MessageReader, _ path: String, _ sender: String) throws -> Void)?

    public init(
        _ name: String, _ signature: String, emitsChanged: EmitsChanged = .true,
        get: @escaping (_ writer: inout MessageWriter, _ path: String) throws -> Void,
        set: ((_ reader: inout MessageReader, _ path: String, _ sender: String) throws -> Void)? = nil
    ) {
        self.name = name
        self.signature = signature
        self.access = set == nil ? .read : .readwrite
        self.emitsChanged = emitsChanged
        self.get = get
        self.set = set
    }
}

/// A signal in an interface table (for introspection; emit with `Connection.emitSignal`).
public struct DBusSignal: Sendable {
    public let name: String
    public let args: [DBusArgument]
    public init(_ name: String, _ args: [DBusArgument] = []) {
        self.name = name
        self.args = args
    }
}

/// One interface: its methods, properties and signals.
public final class DBusInterface {
    public let name: String
    let methodList: [DBusMethod]
    let methods: [String: DBusMethod]
    let propertyList: [DBusProperty]
    let properties: [String: DBusProperty]
    let signals: [DBusSignal]

    public init(_ name: String, methods: [DBusMethod] = [], properties: [DBusProperty] = [], signals: [DBusSignal] = [])
    {
        precondition(DBusNames.isValidInterface(name), "invalid interface name \(name)")
        self.name = name
        methodList = methods
        self.methods = Dictionary(methods.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        propertyList = properties
        self.properties = Dictionary(properties.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        self.signals = signals
    }
}
