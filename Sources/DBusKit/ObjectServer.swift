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

    public init(_ name: String, methods: [DBusMethod] = [], properties: [DBusProperty] = [], signals: [DBusSignal] = []) {
        precondition(DBusNames.isValidInterface(name), "invalid interface name \(name)")
        self.name = name
        methodList = methods
        self.methods = Dictionary(methods.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        propertyList = properties
        self.properties = Dictionary(properties.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        self.signals = signals
    }
}

/// Serves objects on a connection: routes method calls to interface tables and answers
/// `org.freedesktop.DBus.Properties` and `Introspectable` for every exported object.
/// (`org.freedesktop.DBus.Peer` is answered by libdbus itself before any filter runs.)
public final class ObjectServer {
    /// Where replies and signals go.
    public let sink: any MessageSink
    /// Turns an error a handler threw that is not a `DBusError` into one (the agent maps its
    /// contract's errors here); nil, or no mapper, makes it `org.freedesktop.DBus.Error.Failed`.
    public var errorMapper: ((any Error) -> DBusError?)?
    private final class Object {
        // Objects are many (one per task) and have few interfaces: a list, searched in order.
        let interfaces: [DBusInterface]
        var xml: String?
        init(_ interfaces: [DBusInterface]) { self.interfaces = interfaces }
        func interface(_ name: String) -> DBusInterface? { interfaces.first { $0.name == name } }
    }
    // Touched only on the connection's thread, never across a call back into the server: the
    // runtime's exclusivity checks are off for what every call touches.
    @exclusivity(unchecked) private var objects: [String: Object] = [:]

    /// A method that calls reached, by the bytes of their path, interface and member. The last
    /// few are kept, most recent first, so a stream of calls to the same methods is routed with
    /// a few `strcmp`s: no Swift strings, no hashing. A path's routes go when its object comes
    /// or goes.
    private final class Route {
        let path: UnsafeMutablePointer<CChar>
        let interface: UnsafeMutablePointer<CChar>
        let member: UnsafeMutablePointer<CChar>
        let pathString: String
        let table: DBusInterface
        let method: DBusMethod.Storage

        init(path: String, table: DBusInterface, method: DBusMethod) {
            self.path = strdup(path)
            interface = strdup(table.name)
            member = strdup(method.name)
            pathString = path
            self.table = table
            self.method = method.storage
        }

        deinit {
            free(path)
            free(interface)
            free(member)
        }

        func matches(_ path: UnsafePointer<CChar>, _ interface: UnsafePointer<CChar>, _ member: UnsafePointer<CChar>) -> Bool {
            strcmp(self.member, member) == 0 && strcmp(self.interface, interface) == 0 && strcmp(self.path, path) == 0
        }
    }
    @exclusivity(unchecked) private var routes: [Route] = []
    private static let maxRoutes = 8

    private func route(_ path: UnsafePointer<CChar>, _ interface: UnsafePointer<CChar>, _ member: UnsafePointer<CChar>) -> Route? {
        guard let i = routes.firstIndex(where: { $0.matches(path, interface, member) }) else { return nil }
        guard i > 0 else { return routes[0] }
        routes.swapAt(i, i - 1)
        return routes[i - 1]
    }

    private func remember(_ route: Route) {
        if routes.count == Self.maxRoutes { routes.removeLast() }
        routes.insert(route, at: 0)
    }
    /// Paths that serve `org.freedesktop.DBus.ObjectManager` for the objects below them.
    private var managers: Set<String> = []

    /// Who sees which objects, for a server whose objects are not everyone's (nil: all are).
    public weak var audience: (any ObjectAudience)?

    static let propertiesInterface = "org.freedesktop.DBus.Properties"
    static let introspectableInterface = "org.freedesktop.DBus.Introspectable"
    static let peerInterface = "org.freedesktop.DBus.Peer"
    static let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"

    /// Serves calls that arrive on `connection`.
    public convenience init(connection: Connection) {
        self.init(sink: connection)
        connection.methodCallHandler = { [unowned self] message in self.handle(message) }
    }

    /// Answers calls handed to `handle(_:)`, replying and emitting through `sink`.
    public init(sink: any MessageSink) {
        self.sink = sink
    }

    /// Serves `interfaces` at `path`. Below an object manager, this announces the object with
    /// `InterfacesAdded` (carrying every property's current value).
    public func export(path: String, interfaces: [DBusInterface]) {
        precondition(DBusNames.isValidObjectPath(path), "invalid object path \(path)")
        let object = Object(interfaces)
        objects[path] = object
        routes.removeAll { $0.pathString == path }
        invalidateAncestors(of: path)
        if let manager = manager(above: path) { emitInterfacesAdded(manager: manager, path: path, object: object) }
    }

    /// `InterfacesAdded` for the object at `path`: broadcast, or to the peers its audience names
    /// (none while it is not listed).
    private func emitInterfacesAdded(manager: String, path: String, object: Object) {
        for destination in recipients(ofTree: path) {
            try? sink.emitSignal(path: manager, interface: Self.objectManagerInterface, member: "InterfacesAdded", destination: destination) {
                w in
                try w.appendObjectPath(path)
                try appendInterfaces(&w, object, path: path)
            }
        }
    }

    /// Where the object manager's signals about `path` go: `[nil]` (one broadcast) without an
    /// audience, else the peers it names (none while the object is not listed).
    private func recipients(ofTree path: String) -> [String?] {
        guard let audience else { return [nil] }
        guard audience.isListed(path) else { return [] }
        return Self.recipients(audience.signalDestinations(for: path, tree: true))
    }

    /// An audience's answer as the destinations of signals: nil (everyone) is one broadcast.
    private static func recipients(_ destinations: [String]?) -> [String?] {
        destinations.map { $0.map(Optional.some) } ?? [nil]
    }

    /// Announces the object at `path` (`InterfacesAdded`) once its audience lists it.
    public func announce(path: String) {
        guard let object = objects[path], let manager = manager(above: path) else { return }
        emitInterfacesAdded(manager: manager, path: path, object: object)
    }

    /// Stops serving `path`; below an object manager, announces it with `InterfacesRemoved`.
    public func unexport(path: String) {
        guard let object = objects.removeValue(forKey: path) else { return }
        if !managedReplies.isEmpty { noteManagedChange(path: path, interface: nil, removed: object.interfaces.map(\.name)) }
        routes.removeAll { $0.pathString == path }
        invalidateAncestors(of: path)
        if let manager = manager(above: path) {
            let names = object.interfaces.map(\.name)
            for destination in recipients(ofTree: path) {
                emitInterfacesRemoved(manager: manager, path: path, interfaces: names, to: destination)
            }
        }
    }

    /// `InterfacesRemoved` from `manager` for the object at `path` (to `destination` alone, if given).
    private func emitInterfacesRemoved(manager: String, path: String, interfaces: [String], to destination: String? = nil) {
        try? sink.emitSignal(
            path: manager, interface: Self.objectManagerInterface, member: "InterfacesRemoved", destination: destination
        ) { w in
            try w.appendObjectPath(path)
            w.appendArray(elementSignature: "s") { a in for name in interfaces { a.append(name) } }
        }
    }

    /// Makes the object at `path` an `org.freedesktop.DBus.ObjectManager` for every object below it.
    public func addObjectManager(at path: String) {
        precondition(DBusNames.isValidObjectPath(path), "invalid object path \(path)")
        managers.insert(path)
        objects[path]?.xml = nil
    }

    /// The nearest ancestor of `path` that is an object manager.
    private func manager(above path: String) -> String? {
        guard !managers.isEmpty else { return nil }
        var found: String?
        Self.forEachAncestor(of: path) { ancestor in
            guard managers.contains(ancestor) else { return true }
            found = ancestor
            return false
        }
        return found
    }

    /// An ancestor's cached introspection lists its child nodes, which just changed.
    private func invalidateAncestors(of path: String) {
        Self.forEachAncestor(of: path) { ancestor in
            objects[ancestor]?.xml = nil
            return true
        }
    }

    /// Calls `body` with each ancestor of `path`, nearest first, down to "/", while it returns
    /// true. The path is walked as bytes (a valid object path is ASCII).
    private static func forEachAncestor(of path: String, _ body: (String) -> Bool) {
        var end = path.utf8.count
        while end > 1 {
            guard let slash = path.utf8[..<path.utf8.index(path.utf8.startIndex, offsetBy: end)].lastIndex(of: UInt8(ascii: "/"))
            else { return }
            end = path.utf8.distance(from: path.utf8.startIndex, to: slash)
            let ancestor = end == 0 ? "/" : String(path.utf8[..<slash])!
            guard body(ancestor) else { return }
        }
    }

    public func isExported(path: String) -> Bool { objects[path] != nil }

    public var exportedPaths: [String] { Array(objects.keys) }

    // MARK: dispatch

    /// Routes one incoming method call (the connection calls this; tests may too).
    public func handle(_ message: Message) {
        handle(message, sender: message.sender)
    }

    /// Routes one incoming method call whose sender the caller has read already.
    public func handle(_ message: Message, sender: String?) {
        let raw = message.raw
        guard let pathC = dbus_message_get_path(raw), let memberC = dbus_message_get_member(raw) else { return }
        let interfaceC = dbus_message_get_interface(raw)
        if let interfaceC, let route = route(pathC, interfaceC, memberC) {
            do {
                try invoke(route.method, interface: route.table.name, message: message, path: route.pathString, sender: sender)
            } catch {
                replyError(message, thrown: error)
            }
            return
        }
        let path = String(cString: pathC)
        let member = String(cString: memberC)
        let interface = interfaceC.map { String(cString: $0) }
        do {
            guard let object = objects[path] else {
                if interface == nil || interface == ObjectServer.introspectableInterface, member == "Introspect",
                   message.hasSignature(""), hasChildren(path)
                {
                    try respond(message) { w in w.append(introspectionXML(path: path, object: nil, caller: sender)) }
                    return
                }
                throw DBusError.unknownObject("No such object path '\(path)'")
            }
            if let interface {
                if let table = object.interface(interface) {
                    guard let method = table.methods[member] else {
                        throw DBusError.unknownMethod("No such method '\(member)' in interface '\(interface)' at '\(path)'")
                    }
                    remember(Route(path: path, table: table, method: method))
                    try invoke(method.storage, interface: interface, message: message, path: path, sender: sender)
                } else if interface == ObjectServer.propertiesInterface {
                    try checkReader(path, sender)
                    caller = sender ?? ""
                    defer { caller = "" }
                    try handleProperties(member, message: message, path: path, object: object)
                } else if interface == ObjectServer.objectManagerInterface, managers.contains(path) {
                    guard member == "GetManagedObjects" else {
                        throw DBusError.unknownMethod("No such method '\(member)' in interface '\(interface)'")
                    }
                    try getManagedObjects(message, path: path)
                } else if interface == ObjectServer.introspectableInterface {
                    guard member == "Introspect" else {
                        throw DBusError.unknownMethod("No such method '\(member)' in interface '\(interface)'")
                    }
                    try checkReader(path, sender)
                    try introspect(message, path: path, object: object)
                } else {
                    throw DBusError.unknownInterface("No such interface '\(interface)' at object path '\(path)'")
                }
            } else {
                // No interface given: the first interface with this member wins.
                if let table = object.interfaces.first(where: { $0.methods[member] != nil }) {
                    try invoke(table.methods[member]!.storage, interface: table.name, message: message, path: path, sender: sender)
                } else if ["Get", "GetAll", "Set"].contains(member) {
                    try checkReader(path, sender)
                    caller = sender ?? ""
                    defer { caller = "" }
                    try handleProperties(member, message: message, path: path, object: object)
                } else if member == "Introspect" {
                    try checkReader(path, sender)
                    try introspect(message, path: path, object: object)
                } else if member == "GetManagedObjects", managers.contains(path) {
                    try getManagedObjects(message, path: path)
                } else {
                    throw DBusError.unknownMethod("No such method '\(member)' at object path '\(path)'")
                }
            }
        } catch {
            replyError(message, thrown: error)
        }
    }

    /// An object its audience hides from `sender` does not exist for it; one it may read, it
    /// follows from now on (its signals reach it).
    private func checkReader(_ path: String, _ sender: String?) throws(DBusError) {
        guard let audience, let sender else { return }
        guard audience.mayRead(path, caller: sender) else { throw DBusError.unknownObject("No such object path '\(path)'") }
        audience.didRead(path, caller: sender, tree: false)
    }

    /// The sender of the Properties call being answered, for a getter whose answer depends on who
    /// asks (on the connection's thread; "" outside such a call or for signals).
    @exclusivity(unchecked) public private(set) var caller = ""

    /// The error reply for whatever a handler threw (through `errorMapper`); also for a reply a
    /// handler deferred and that failed later.
    public func replyError(_ message: Message, thrown error: any Error) {
        if let error = error as? DBusError {
            replyError(message, error)
        } else {
            replyError(message, errorMapper?(error) ?? .failed("\(error)"))
        }
    }

    private func invoke(
        _ method: DBusMethod.Storage, interface: String, message: Message, path: String, sender: String?
    ) throws {
        let ok = method.inSignature.withUnsafeBufferPointer { message.hasSignature($0.baseAddress!) }
        guard ok else {
            throw DBusError.invalidArgs(
                "Invalid arguments for \(interface).\(method.name): expected signature '\(DBusMethod(storage: method).inSignatureString)', got '\(message.signature)'")
        }
        // The reply goes in the wrapper of the last call's reply when nobody kept that one (an
        // allocation and a release less per call); not in a call made from inside a handler.
        guard !invoking else {
            return try run(method, message: message, path: path, sender: sender, reply: message.makeReturn())
        }
        invoking = true
        defer { invoking = false }
        if let spare = spareReply {
            spare.becomeReturn(to: message)
        } else {
            spareReply = message.makeReturn()
        }
        defer { keepSpareReplyIfUnshared() }
        try run(method, message: message, path: path, sender: sender, reply: spareReply!)
    }

    /// The last reply's wrapper, when nothing kept it (see `invoke`).
    @exclusivity(unchecked) private var spareReply: Message?
    @exclusivity(unchecked) private var invoking = false

    private func keepSpareReplyIfUnshared() {
        // Checked on the property itself, after `run` returned: no copy of it is left alive.
        let shared = !isKnownUniquelyReferenced(&spareReply!)
        // The wrapper keeps the sent reply until the next call: not one that holds descriptors
        // (a lease's write end kept open would hide the holder's hang-up) or much memory.
        if shared || !spareReply!.isSmallAndFDFree { spareReply = nil }
    }

    @inline(never)
    private func run(_ method: DBusMethod.Storage, message: Message, path: String, sender: String?, reply: Message) throws {
        var call = MethodCall(message: message, path: path, sender: sender ?? "", reply: reply)
        try method.handler(&call)
        if !call.isDeferred, !message.noReplyExpected { sink.send(reply) }
    }

    private func introspect(_ message: Message, path: String, object: Object) throws {
        try checkSignature(message, "", "Introspect")
        if object.xml == nil { object.xml = introspectionXML(path: path, object: object) }
        try respond(message) { w in w.append(object.xml!) }
    }

    /// Whether `caller` sees the object at `child` among its parent's nodes and in GetManagedObjects.
    private func lists(_ child: String, to caller: String?) -> Bool {
        guard let audience else { return true }
        return audience.isListed(child) && (caller.map { audience.mayRead(child, caller: $0) } ?? true)
    }

    private func checkSignature(_ message: Message, _ expected: String, _ what: String) throws(DBusError) {
        let sig = message.signature
        guard sig == expected else {
            throw .invalidArgs("Invalid arguments for \(what): expected signature '\(expected)', got '\(sig)'")
        }
    }

    /// Answers `message` with a return whose body `body` writes (nothing when it expects no reply).
    public func respond(to message: Message, _ body: (inout MessageWriter) throws -> Void) throws {
        try respond(message, body)
    }

    private func respond(_ message: Message, _ body: (inout MessageWriter) throws -> Void) throws {
        let reply = message.makeReturn()
        var w = reply.writer()
        try body(&w)
        if !message.noReplyExpected { sink.send(reply) }
    }

    /// Answers `message` with `error` (nothing when it expects no reply).
    public func replyError(_ message: Message, _ error: DBusError) {
        guard !message.noReplyExpected else { return }
        sink.send(message.makeError(error))
    }

    // MARK: org.freedesktop.DBus.Properties

    private func lookupInterface(_ object: Object, _ name: String, path: String) throws(DBusError) -> DBusInterface {
        guard let table = object.interface(name) else {
            throw .unknownInterface("No such interface '\(name)' at object path '\(path)'")
        }
        return table
    }

    private func lookupProperty(_ table: DBusInterface, _ name: String) throws(DBusError) -> DBusProperty {
        guard let property = table.properties[name] else {
            throw .unknownProperty("No such property '\(name)' in interface '\(table.name)'")
        }
        return property
    }

    private func handleProperties(_ member: String, message: Message, path: String, object: Object) throws {
        var args = message.reader()
        switch member {
        case "Get":
            try checkSignature(message, "ss", "org.freedesktop.DBus.Properties.Get")
            let table = try lookupInterface(object, try args.read(String.self), path: path)
            let property = try lookupProperty(table, try args.read(String.self))
            try respond(message) { w in
                try w.appendVariant(signature: property.signature) { v in try property.get(&v, path) }
            }
        case "GetAll":
            try checkSignature(message, "s", "org.freedesktop.DBus.Properties.GetAll")
            let name = try args.read(String.self)
            // An empty name means every interface (the specification allows it).
            let tables = name.isEmpty ? object.interfaces : [try lookupInterface(object, name, path: path)]
            try respond(message) { w in
                try w.appendArray(elementSignature: "{sv}") { a in
                    for table in tables {
                        for property in table.propertyList { try appendEntry(&a, property, path: path) }
                    }
                }
            }
        case "Set":
            try checkSignature(message, "ssv", "org.freedesktop.DBus.Properties.Set")
            let table = try lookupInterface(object, try args.read(String.self), path: path)
            let property = try lookupProperty(table, try args.read(String.self))
            guard let setter = property.set else {
                throw DBusError.propertyReadOnly("Property '\(property.name)' of '\(table.name)' is read-only")
            }
            var (signature, inner) = try args.enterVariant()
            guard signature == property.signature else {
                throw DBusError.invalidArgs(
                    "Property '\(property.name)' has type '\(property.signature)', got a value of type '\(signature)'")
            }
            try setter(&inner, path, message.sender ?? "")
            try respond(message) { _ in }
        default:
            throw DBusError.unknownMethod("No such method '\(member)' in interface '\(ObjectServer.propertiesInterface)'")
        }
    }

    private func appendEntry(_ a: inout MessageWriter, _ property: DBusProperty, path: String) throws {
        try a.appendDictEntry { e in
            e.append(property.name)
            try e.appendVariant(signature: property.signature) { v in try property.get(&v, path) }
        }
    }

    /// Emits `PropertiesChanged` for `names` of `interface` at `path`, with their current values.
    public func emitPropertiesChanged(path: String, interface: String, changed names: [String], invalidated: [String] = []) {
        guard let object = objects[path], let table = object.interface(interface) else { return }
        if !managedReplies.isEmpty { noteManagedChange(path: path, interface: interface, removed: nil) }
        let destinations = audience.map { Self.recipients($0.signalDestinations(for: path, tree: false)) } ?? [nil]
        for destination in destinations {
            emitPropertiesChanged(path: path, interface: interface, invalidated: invalidated, to: destination) { a in
                for name in names {
                    if let property = table.properties[name] { try appendEntry(&a, property, path: path) }
                }
            }
        }
    }

    /// `PropertiesChanged` for `interface` at `path`, its `a{sv}` appended by `changed` (to
    /// `destination` alone, if given).
    private func emitPropertiesChanged(
        path: String, interface: String, invalidated: [String] = [], to destination: String? = nil,
        _ changed: (inout MessageWriter) throws -> Void
    ) {
        try? sink.emitSignal(path: path, interface: Self.propertiesInterface, member: "PropertiesChanged", destination: destination) {
            w in
            w.append(interface)
            try w.appendArray(elementSignature: "{sv}", changed)
            w.appendArray(elementSignature: "s") { a in for name in invalidated { a.append(name) } }
        }
    }

    // MARK: org.freedesktop.DBus.ObjectManager

    /// Runs work on a later turn of the loop (set by the owner of the loop). With it, a large
    /// GetManagedObjects reply is built `managedSlice` objects per turn, so that no caller holds the
    /// loop for the whole of it (20,000 task objects took 0.74 s in one go).
    public var deferral: ((@escaping () -> Void) -> Void)?
    public static let managedSlice = 128
    /// Replies being built at once, at most; more wait (one per caller at a time).
    static let managedBuilds = 2

    /// One GetManagedObjects reply built over several turns. Objects already in it that change
    /// or go before it is sent are told to the caller again right after it (unicast
    /// PropertiesChanged with every property, or InterfacesRemoved): the signals of the change went
    /// out before the reply, and the reply's older values would otherwise win.
    private final class ManagedReply {
        let call: Message
        let reply: Message
        let caller: String?
        let manager: String
        var array: MessageWriter.OpenArray
        let paths: [String]
        var next = 0
        var sent: Set<String> = []
        var removed: [(path: String, interfaces: [String])] = []
        var changed: [String: Set<String>] = [:]

        init(call: Message, reply: Message, caller: String?, manager: String, array: MessageWriter.OpenArray, paths: [String]) {
            self.call = call
            self.reply = reply
            self.caller = caller
            self.manager = manager
            self.array = array
            self.paths = paths
        }
    }

    private var managedReplies: [ManagedReply] = []
    private var managedWaiting: [(call: Message, path: String)] = []

    private func getManagedObjects(_ message: Message, path: String) throws {
        try checkSignature(message, "", "org.freedesktop.DBus.ObjectManager.GetManagedObjects")
        let prefix = path == "/" ? "/" : path + "/"
        let caller = message.sender
        if let caller { audience?.didRead(path, caller: caller, tree: true) }
        if deferral != nil {
            let paths = objects.keys.filter { $0.hasPrefix(prefix) && $0 != path && lists($0, to: caller) }
            if paths.count > Self.managedSlice {
                guard managedReplies.count < Self.managedBuilds, !managedReplies.contains(where: { $0.caller == caller }) else {
                    managedWaiting.append((message, path))
                    return
                }
                return startManagedReply(message, manager: path, paths: paths)
            }
        }
        try respond(message) { w in
            try w.appendArray(elementSignature: "{oa{sa{sv}}}") { a in
                for (child, object) in objects where child.hasPrefix(prefix) && child != path && lists(child, to: caller) {
                    try appendManagedObject(&a, object, path: child)
                }
            }
        }
    }

    private func startManagedReply(_ call: Message, manager: String, paths: [String]) {
        let reply = call.makeReturn()
        // Through libdbus's iterators, which can stay open across turns and hand libdbus a body
        // it need not check again: a body marshalled here is checked whole when sent, one step of
        // tens of milliseconds for a reply of megabytes.
        var w = reply.libdbusWriter()
        let array = w.openArray(elementSignature: "{oa{sa{sv}}}")
        let build = ManagedReply(call: call, reply: reply, caller: call.sender, manager: manager, array: array, paths: paths)
        managedReplies.append(build)
        continueManagedReply(build)
    }

    /// One slice of `build`; the next on a later turn, or the reply and its corrections.
    private func continueManagedReply(_ build: ManagedReply) {
        let end = min(build.paths.count, build.next + Self.managedSlice)
        for path in build.paths[build.next..<end] {
            guard let object = objects[path] else { continue }
            do {
                try appendManagedObject(&build.array.elements, object, path: path)
                build.sent.insert(path)
            } catch {
                continue  // an object whose properties cannot be read is left out
            }
        }
        build.next = end
        if build.next < build.paths.count, let deferral {
            return deferral { [weak self, build] in self?.continueManagedReply(build) }
        }
        MessageWriter.close(&build.array)
        managedReplies.removeAll { $0 === build }
        if !build.call.noReplyExpected { sink.send(build.reply) }
        if let caller = build.caller {
            for (path, interfaces) in build.removed {
                emitInterfacesRemoved(manager: build.manager, path: path, interfaces: interfaces, to: caller)
            }
            for (path, interfaces) in build.changed.sorted(by: { $0.key < $1.key }) {
                guard let object = objects[path] else { continue }
                for name in interfaces.sorted() {
                    guard let table = object.interface(name) else { continue }
                    emitPropertiesChanged(path: path, interface: name, to: caller) { a in
                        for property in table.propertyList { try appendEntry(&a, property, path: path) }
                    }
                }
            }
        }
        // The next waiting call whose caller has no build under way.
        if let i = managedWaiting.firstIndex(where: { w in !managedReplies.contains { $0.caller == w.call.sender } }) {
            let (call, path) = managedWaiting.remove(at: i)
            do { try getManagedObjects(call, path: path) } catch { replyError(call, thrown: error) }
        }
    }

    /// An object already in a reply under way changed or went: noted for its correction.
    private func noteManagedChange(path: String, interface: String?, removed: [String]?) {
        for build in managedReplies where build.sent.contains(path) {
            if let removed {
                build.removed.append((path, removed))
                build.changed[path] = nil
            } else if let interface {
                build.changed[path, default: []].insert(interface)
            }
        }
    }

    /// One `{oa{sa{sv}}}` entry of GetManagedObjects: the object's path and every interface's properties.
    private func appendManagedObject(_ w: inout MessageWriter, _ object: Object, path: String) throws {
        try w.appendDictEntry { e in
            try e.appendObjectPath(path)
            try appendInterfaces(&e, object, path: path)
        }
    }

    /// `a{sa{sv}}`: each interface of the object with all its properties.
    private func appendInterfaces(_ w: inout MessageWriter, _ object: Object, path: String) throws {
        try w.appendArray(elementSignature: "{sa{sv}}") { a in
            for table in object.interfaces {
                try a.appendDictEntry { e in
                    e.append(table.name)
                    try e.appendArray(elementSignature: "{sv}") { p in
                        for property in table.propertyList { try appendEntry(&p, property, path: path) }
                    }
                }
            }
        }
    }

    // MARK: introspection

    private func hasChildren(_ path: String) -> Bool {
        let prefix = path == "/" ? "/" : path + "/"
        return objects.keys.contains { $0.hasPrefix(prefix) }
    }

    private func childNodes(_ path: String, caller: String?) -> [String] {
        let prefix = path == "/" ? "/" : path + "/"
        var names = Set<String>()
        for key in objects.keys where key.hasPrefix(prefix) && key != path && lists(key, to: caller) {
            if let first = key.dropFirst(prefix.count).split(separator: "/").first { names.insert(String(first)) }
        }
        return names.sorted()
    }

    public func introspectionXML(path: String) -> String {
        introspectionXML(path: path, object: objects[path])
    }

    /// (`caller`: for a node that is no object, whose children may depend on who asks; an object's
    /// XML is cached and lists every child its audience lists.)
    private func introspectionXML(path: String, object: Object?, caller: String? = nil) -> String {
        var x = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        x += Self.standardInterfacesXML
        if managers.contains(path) { x += Self.objectManagerXML }
        for table in object?.interfaces ?? [] {
            x += "  <interface name=\"\(table.name)\">\n"
            for m in table.methodList {
                x += "    <method name=\"\(m.name)\">\n"
                for a in m.inArgs { x += "      <arg name=\"\(a.name)\" type=\"\(xmlEscape(a.signature))\" direction=\"in\"/>\n" }
                for a in m.outArgs { x += "      <arg name=\"\(a.name)\" type=\"\(xmlEscape(a.signature))\" direction=\"out\"/>\n" }
                // gdbus-codegen passes the fd list of a method only when told to; without it the
                // generated C code drops every fd (and a lease ends the moment it arrives).
                if (m.inArgs + m.outArgs).contains(where: { $0.signature.contains("h") }) {
                    x += "      <annotation name=\"org.gtk.GDBus.C.UnixFD\" value=\"true\"/>\n"
                }
                x += "    </method>\n"
            }
            for s in table.signals {
                x += "    <signal name=\"\(s.name)\">\n"
                for a in s.args { x += "      <arg name=\"\(a.name)\" type=\"\(xmlEscape(a.signature))\"/>\n" }
                x += "    </signal>\n"
            }
            for p in table.propertyList {
                let open = "    <property name=\"\(p.name)\" type=\"\(xmlEscape(p.signature))\" access=\"\(p.access.rawValue)\""
                if p.emitsChanged == .true {
                    x += open + "/>\n"
                } else {
                    x += open + ">\n"
                    x += "      <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" value=\"\(p.emitsChanged.rawValue)\"/>\n"
                    x += "    </property>\n"
                }
            }
            x += "  </interface>\n"
        }
        for child in childNodes(path, caller: caller) { x += "  <node name=\"\(child)\"/>\n" }
        x += "</node>\n"
        return x
    }

    private func xmlEscape(_ s: String) -> String {
        s.replacing("&", with: "&amp;").replacing("<", with: "&lt;").replacing(">", with: "&gt;")
            .replacing("\"", with: "&quot;")
    }

    static let objectManagerXML = """
          <interface name="org.freedesktop.DBus.ObjectManager">
            <method name="GetManagedObjects">
              <arg name="objects" type="a{oa{sa{sv}}}" direction="out"/>
            </method>
            <signal name="InterfacesAdded">
              <arg name="object" type="o"/>
              <arg name="interfaces" type="a{sa{sv}}"/>
            </signal>
            <signal name="InterfacesRemoved">
              <arg name="object" type="o"/>
              <arg name="interfaces" type="as"/>
            </signal>
          </interface>

        """

    static let standardInterfacesXML = """
          <interface name="org.freedesktop.DBus.Peer">
            <method name="Ping"/>
            <method name="GetMachineId">
              <arg name="machine_uuid" type="s" direction="out"/>
            </method>
          </interface>
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect">
              <arg name="xml_data" type="s" direction="out"/>
            </method>
          </interface>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="property_name" type="s" direction="in"/>
              <arg name="value" type="v" direction="out"/>
            </method>
            <method name="GetAll">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="properties" type="a{sv}" direction="out"/>
            </method>
            <method name="Set">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="property_name" type="s" direction="in"/>
              <arg name="value" type="v" direction="in"/>
            </method>
            <signal name="PropertiesChanged">
              <arg name="interface_name" type="s"/>
              <arg name="changed_properties" type="a{sv}"/>
              <arg name="invalidated_properties" type="as"/>
            </signal>
          </interface>

        """
}

/// Who sees which objects of an `ObjectServer` (DESIGN "Trust and isolation": a sandboxed app
/// reads only its own work, and the object tree one reply carries is bounded). Objects it hides
/// from a caller do not exist for that caller: not in GetManagedObjects, not among a node's
/// children, `UnknownObject` to Properties and Introspect. Signals about an object go where it says.
public protocol ObjectAudience: AnyObject {
    /// Whether `caller` may read the object at `path`.
    func mayRead(_ path: String, caller: String) -> Bool
    /// Whether the object at `path` is in the object tree (GetManagedObjects, InterfacesAdded and
    /// InterfacesRemoved, its parent's nodes); an object not listed still answers calls.
    func isListed(_ path: String) -> Bool
    /// Where signals about the object at `path` go: nil to everyone (a broadcast), else these
    /// peers (unicast). `tree`: the object manager's InterfacesAdded/Removed, else its own.
    func signalDestinations(for path: String, tree: Bool) -> [String]?
    /// `caller` read the object tree below the manager at `path` (`tree`), or the object itself.
    func didRead(_ path: String, caller: String, tree: Bool)
}
