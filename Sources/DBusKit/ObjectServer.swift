// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus
import Glibc

/// Serves objects on a connection: routes method calls to interface tables and answers
/// `org.freedesktop.DBus.Properties` and `Introspectable` for every exported object.
/// (`org.freedesktop.DBus.Peer` is answered by libdbus itself before any filter runs.)
public final class ObjectServer {
    /// Where replies and signals go.
    public let sink: any MessageSink
    /// Turns an error a handler threw that is not a `DBusError` into one (the agent maps its
    /// contract's errors here); nil, or no mapper, makes it `org.freedesktop.DBus.Error.Failed`.
    public var errorMapper: ((any Error) -> DBusError?)?
    final class Object {
        // Objects are many (one per task) and have few interfaces: a list, searched in order.
        let interfaces: [DBusInterface]
        var xml: String?
        init(_ interfaces: [DBusInterface]) { self.interfaces = interfaces }
        func interface(_ name: String) -> DBusInterface? { interfaces.first { $0.name == name } }
    }
    // Touched only on the connection's thread, never across a call back into the server: the
    // runtime's exclusivity checks are off for what every call touches.
    @exclusivity(unchecked) var objects: [String: Object] = [:]

    /// A method that calls reached, by the bytes of their path, interface and member. The last
    /// few are kept, most recent first, so a stream of calls to the same methods is routed with
    /// a few `strcmp`s: no Swift strings, no hashing. A path's routes go when its object comes
    /// or goes.
    final class Route {
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

        func matches(_ path: UnsafePointer<CChar>, _ interface: UnsafePointer<CChar>, _ member: UnsafePointer<CChar>)
            -> Bool
        {
            strcmp(self.member, member) == 0 && strcmp(self.interface, interface) == 0 && strcmp(self.path, path) == 0
        }
    }
    @exclusivity(unchecked) var routes: [Route] = []
    static let maxRoutes = 8

    func route(_ path: UnsafePointer<CChar>, _ interface: UnsafePointer<CChar>, _ member: UnsafePointer<CChar>)
        -> Route?
    {
        guard let i = routes.firstIndex(where: { $0.matches(path, interface, member) }) else { return nil }
        guard i > 0 else { return routes[0] }
        routes.swapAt(i, i - 1)
        return routes[i - 1]
    }

    func remember(_ route: Route) {
        if routes.count == Self.maxRoutes { routes.removeLast() }
        routes.insert(route, at: 0)
    }
    /// Paths that serve `org.freedesktop.DBus.ObjectManager` for the objects below them.
    var managers: Set<String> = []

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
    func emitInterfacesAdded(manager: String, path: String, object: Object) {
        for destination in recipients(ofTree: path) {
            try? sink.emitSignal(
                path: manager, interface: Self.objectManagerInterface, member: "InterfacesAdded",
                destination: destination
            ) {
                w in
                try w.appendObjectPath(path)
                try appendInterfaces(&w, object, path: path)
            }
        }
    }

    /// Where the object manager's signals about `path` go: `[nil]` (one broadcast) without an
    /// audience, else the peers it names (none while the object is not listed).
    func recipients(ofTree path: String) -> [String?] {
        guard let audience else { return [nil] }
        guard audience.isListed(path) else { return [] }
        return Self.recipients(audience.signalDestinations(for: path, tree: true))
    }

    /// An audience's answer as the destinations of signals: nil (everyone) is one broadcast.
    static func recipients(_ destinations: [String]?) -> [String?] {
        destinations.map { $0.map(Optional.some) } ?? [nil]
    }

    /// Announces the object at `path` (`InterfacesAdded`) once its audience lists it.
    public func announce(path: String) {
        guard let object = objects[path], let manager = manager(above: path) else { return }
        emitInterfacesAdded(manager: manager, path: path, object: object)
    }

    /// Tells the tree's readers that the object at `path` leaves the tree (`InterfacesRemoved`)
    /// while it stays served: call it while its audience still lists it, just before it stops.
    public func withdraw(path: String) {
        guard let object = objects[path], let manager = manager(above: path) else { return }
        let names = object.interfaces.map(\.name)
        if !managedReplies.isEmpty { noteManagedChange(path: path, interface: nil, removed: names) }
        for destination in recipients(ofTree: path) {
            emitInterfacesRemoved(manager: manager, path: path, interfaces: names, to: destination)
        }
    }

    /// Stops serving `path`; below an object manager, announces it with `InterfacesRemoved`.
    public func unexport(path: String) {
        guard let object = objects.removeValue(forKey: path) else { return }
        if !managedReplies.isEmpty {
            noteManagedChange(path: path, interface: nil, removed: object.interfaces.map(\.name))
        }
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
    func emitInterfacesRemoved(manager: String, path: String, interfaces: [String], to destination: String? = nil) {
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
    func manager(above path: String) -> String? {
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
    func invalidateAncestors(of path: String) {
        Self.forEachAncestor(of: path) { ancestor in
            objects[ancestor]?.xml = nil
            return true
        }
    }

    /// Calls `body` with each ancestor of `path`, nearest first, down to "/", while it returns
    /// true. The path is walked as bytes (a valid object path is ASCII).
    static func forEachAncestor(of path: String, _ body: (String) -> Bool) {
        var end = path.utf8.count
        while end > 1 {
            guard
                let slash = path.utf8[..<path.utf8.index(path.utf8.startIndex, offsetBy: end)].lastIndex(
                    of: UInt8(ascii: "/"))
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
                try invoke(
                    route.method, interface: route.table.name, message: message, path: route.pathString, sender: sender)
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
            // Hidden and missing answer alike, whatever the call: a caller learns nothing of an
            // object its audience hides (not that it exists, nor who owns it).
            if let audience, let sender, !audience.mayRead(path, caller: sender) {
                throw DBusError.unknownObject("No such object path '\(path)'")
            }
            if let interface {
                if let table = object.interface(interface) {
                    guard let method = table.methods[member] else {
                        throw DBusError.unknownMethod(
                            "No such method '\(member)' in interface '\(interface)' at '\(path)'")
                    }
                    // Calls on an object whose readers depend on the caller always come this way,
                    // past the audience's check above: a remembered route would skip it.
                    if audience?.restricts(path) != true { remember(Route(path: path, table: table, method: method)) }
                    try invoke(method.storage, interface: interface, message: message, path: path, sender: sender)
                } else if interface == ObjectServer.propertiesInterface {
                    noteReader(path, sender)
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
                    noteReader(path, sender)
                    try introspect(message, path: path, object: object)
                } else {
                    throw DBusError.unknownInterface("No such interface '\(interface)' at object path '\(path)'")
                }
            } else {
                // No interface given: the first interface with this member wins.
                if let table = object.interfaces.first(where: { $0.methods[member] != nil }) {
                    try invoke(
                        table.methods[member]!.storage, interface: table.name, message: message, path: path,
                        sender: sender)
                } else if ["Get", "GetAll", "Set"].contains(member) {
                    noteReader(path, sender)
                    caller = sender ?? ""
                    defer { caller = "" }
                    try handleProperties(member, message: message, path: path, object: object)
                } else if member == "Introspect" {
                    noteReader(path, sender)
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

    /// `sender` read the object (which `handle` has let it see): it follows it from now on (its
    /// signals reach it).
    func noteReader(_ path: String, _ sender: String?) {
        guard let audience, let sender else { return }
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

    func invoke(
        _ method: DBusMethod.Storage, interface: String, message: Message, path: String, sender: String?
    ) throws {
        let ok = method.inSignature.withUnsafeBufferPointer { message.hasSignature($0.baseAddress!) }
        guard ok else {
            throw DBusError.invalidArgs(
                "Invalid arguments for \(interface).\(method.name): expected signature '\(DBusMethod(storage: method).inSignatureString)', got '\(message.signature)'"
            )
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
    @exclusivity(unchecked) var spareReply: Message?
    @exclusivity(unchecked) var invoking = false

    func keepSpareReplyIfUnshared() {
        // Checked on the property itself, after `run` returned: no copy of it is left alive.
        let shared = !isKnownUniquelyReferenced(&spareReply!)
        // The wrapper keeps the sent reply until the next call: not one that holds descriptors
        // (a lease's write end kept open would hide the holder's hang-up) or much memory.
        if shared || !spareReply!.isSmallAndFDFree { spareReply = nil }
    }

    @inline(never)
    func run(_ method: DBusMethod.Storage, message: Message, path: String, sender: String?, reply: Message) throws {
        var call = MethodCall(message: message, path: path, sender: sender ?? "", reply: reply)
        try method.handler(&call)
        if !call.isDeferred, !message.noReplyExpected { sink.send(reply) }
    }

    func introspect(_ message: Message, path: String, object: Object) throws {
        try checkSignature(message, "", "Introspect")
        if object.xml == nil { object.xml = introspectionXML(path: path, object: object) }
        try respond(message) { w in w.append(object.xml!) }
    }

    /// Whether `caller` sees the object at `child` among its parent's nodes and in GetManagedObjects.
    func lists(_ child: String, to caller: String?) -> Bool {
        guard let audience else { return true }
        return audience.isListed(child) && (caller.map { audience.mayRead(child, caller: $0) } ?? true)
    }

    func checkSignature(_ message: Message, _ expected: String, _ what: String) throws(DBusError) {
        let sig = message.signature
        guard sig == expected else {
            throw .invalidArgs("Invalid arguments for \(what): expected signature '\(expected)', got '\(sig)'")
        }
    }

    /// Answers `message` with a return whose body `body` writes (nothing when it expects no reply).
    public func respond(to message: Message, _ body: (inout MessageWriter) throws -> Void) throws {
        try respond(message, body)
    }

    func respond(_ message: Message, _ body: (inout MessageWriter) throws -> Void) throws {
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

    // MARK: org.freedesktop.DBus.ObjectManager

    /// Runs work on a later turn of the loop (set by the owner of the loop). With it, a large
    /// GetManagedObjects reply is built `managedSlice` objects per turn, so that no caller holds the
    /// loop for the whole of a large tree.
    public var runLater: ((@escaping () -> Void) -> Void)?
    public static let managedSlice = 128
    /// Replies being built at once, at most; more wait (one per caller at a time).
    static let managedBuilds = 2

    /// One GetManagedObjects reply built over several turns. Objects already in it that change
    /// or go before it is sent are told to the caller again right after it (unicast
    /// PropertiesChanged with every property, or InterfacesRemoved): the signals of the change went
    /// out before the reply, and the reply's older values would otherwise win.
    final class ManagedReply {
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

        init(
            call: Message, reply: Message, caller: String?, manager: String, array: MessageWriter.OpenArray,
            paths: [String]
        ) {
            self.call = call
            self.reply = reply
            self.caller = caller
            self.manager = manager
            self.array = array
            self.paths = paths
        }
    }

    var managedReplies: [ManagedReply] = []
    var managedWaiting: [(call: Message, path: String)] = []
}

/// Who sees which objects of an `ObjectServer` (docs/contract.md, "Trust and isolation": a sandboxed app
/// reads only its own work, and the object tree one reply carries is bounded). Objects it hides
/// from a caller do not exist for that caller: not in GetManagedObjects, not among a node's
/// children, `UnknownObject` to Properties and Introspect. Signals about an object go where it says.
public protocol ObjectAudience: AnyObject {
    /// Whether `caller` may read the object at `path`.
    func mayRead(_ path: String, caller: String) -> Bool
    /// Whether who may read the object at `path` depends on the caller (its calls are then
    /// checked every time, never routed from memory).
    func restricts(_ path: String) -> Bool
    /// Whether the object at `path` is in the object tree (GetManagedObjects, InterfacesAdded and
    /// InterfacesRemoved, its parent's nodes); an object not listed still answers calls.
    func isListed(_ path: String) -> Bool
    /// Where signals about the object at `path` go: nil to everyone (a broadcast), else these
    /// peers (unicast). `tree`: the object manager's InterfacesAdded/Removed, else its own.
    func signalDestinations(for path: String, tree: Bool) -> [String]?
    /// `caller` read the object tree below the manager at `path` (`tree`), or the object itself.
    func didRead(_ path: String, caller: String, tree: Bool)
}
