// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import LinuxKit
import Logging
import NetActivityContract
import NetActivityCore
import NetActivityTesting

@testable import NetActivityAgent

/// Records every message the services send, with the manual time it was sent at.
final class RecordingSink: MessageSink {
    let uniqueName = ":1.1"
    private let scheduler: ManualScheduler
    private(set) var sent: [(at: Double, message: Message)] = []

    init(scheduler: ManualScheduler) { self.scheduler = scheduler }

    func send(_ message: Message) { sent.append((Double(scheduler.nowNanoseconds) / 1e9, message)) }
}

/// A peer registry the test drives: process names arrive when the test delivers them, and
/// departures when it says so.
final class ManualPeers: PeerRegistry {
    private var handlers: [(String) -> Void] = []
    private var lookups: [(peer: String, known: (String) -> Void)] = []
    var names: [String: String] = [:]
    var identities: [String: ClientIdentity] = [:]

    func app(of peer: String) -> String { identity(of: peer).leaf }
    func identity(of peer: String) -> ClientIdentity { identities[peer] ?? ClientIdentity(app: peer) }

    func lookUpProcessName(of peer: String, _ known: @escaping (String) -> Void) { lookups.append((peer, known)) }
    func onDeparture(_ handler: @escaping (String) -> Void) { handlers.append(handler) }

    func deliverNames() {
        let pending = lookups
        lookups.removeAll()
        for lookup in pending { lookup.known(names[lookup.peer] ?? "") }
    }

    func depart(_ peer: String) { for handler in handlers { handler(peer) } }
}

/// The activity and task services as the agent wires them, on a manual scheduler with a
/// recording sink and a manual peer registry: no bus, no sleeping.
final class DriverHarness {
    let scheduler = ManualScheduler()
    let sink: RecordingSink
    let peers = ManualPeers()
    let server: ObjectServer
    let context: AgentContext
    let activity: ActivityService
    let tasks: TaskService
    let images: ImageCacheService
    /// HTTP for the downloader: gated, answered by the test.
    let transport = FakeTransport()
    let downloads: DownloadService
    /// Lease fds would be watched here; the driver tests never run it.
    let loop = EventLoop()

    static let panel = ":1.900"

    init(activation: Double = 1.0, completion: Double = 0.17, linger: Double = 5.0) {
        sink = RecordingSink(scheduler: scheduler)
        server = ObjectServer(sink: sink)
        var logger = Logger(label: "driver-test")
        logger.logLevel = .critical
        context = AgentContext(scheduler: scheduler, server: server, peers: peers, logger: logger)
        activity = ActivityService(
            context: context, loop: loop, activationDelay: activation, completionDelay: completion)
        tasks = TaskService(context: context, activity: activity, linger: linger)
        activity.tasks = tasks
        let pixels = PixelTier(fileLimit: context.accounts.fileLimit)
        let decoding = Decoding(tier: pixels, context: context, loop: loop)
        images = ImageCacheService(context: context, pixels: pixels, decoding: decoding)
        downloads = DownloadService(
            context: context, loop: loop, images: images, pixels: pixels, decoding: decoding, tasks: tasks,
            activity: activity,
            announceAfter: { .seconds(double: activation) }, transport: transport, diskTier: false)
        peers.onDeparture { [unowned self] peer in
            self.tasks.ownerVanished(peer)
            self.downloads.ownerVanished(peer)
            self.activity.clientVanished(peer)
        }
        server.addObjectManager(at: NetActivityBus.objectPath)
        // A host panel follows the object tree (it read it with GetManagedObjects): task signals,
        // which are never broadcast, go to it.
        tasks.audience.didRead(NetActivityBus.objectPath, caller: Self.panel, tree: true)
        server.export(
            path: NetActivityBus.objectPath,
            interfaces: [activity.makeInterface(), images.makeInterface(), downloads.makeInterface()])
    }

    func at(_ seconds: Double) { scheduler.advance(toNanoseconds: UInt64((seconds * 1e9).rounded())) }

    /// Hands a method call from `sender` to the object server, as the bus would; returns the reply.
    @discardableResult
    func call(
        _ sender: String, _ member: String, path: String = NetActivityBus.objectPath,
        interface: NetActivityInterface = .activity, _ body: (inout MessageWriter) throws -> Void = { _ in }
    ) throws -> Message? {
        let message = try Message.methodCall(
            destination: NetActivityBus.name, path: path, interface: interface.rawValue, member: member)
        message.setSender(sender)
        var w = message.writer()
        try body(&w)
        let before = sink.sent.count
        server.handle(message)
        return sink.sent[before...].last { $0.message.kind == .methodReturn || $0.message.kind == .error }?.message
    }

    /// A property's value, read through org.freedesktop.DBus.Properties.Get as a client would.
    func property(_ path: String, _ interface: NetActivityInterface, _ name: String, caller: String = ":1.99") throws
        -> DBusValue?
    {
        let answer = try properties("Get", path, interface, name, caller: caller) { _ in }
        guard let reply = answer, reply.kind == .methodReturn else { return nil }
        var r = reply.reader()
        guard case .variant(let value) = try r.readValue() else { return nil }
        return value
    }

    /// Sets a property through org.freedesktop.DBus.Properties.Set as a client would; the reply.
    func setProperty(
        _ path: String, _ interface: NetActivityInterface, _ name: String, _ value: DBusValue, caller: String
    ) throws -> Message? {
        try properties("Set", path, interface, name, caller: caller) { w in
            try w.appendVariant(signature: value.signature) { v in try v.append(value) }
        }
    }

    private func properties(
        _ member: String, _ path: String, _ interface: NetActivityInterface, _ name: String, caller: String,
        _ rest: (inout MessageWriter) throws -> Void
    ) throws -> Message? {
        let message = try Message.methodCall(
            destination: NetActivityBus.name, path: path, interface: "org.freedesktop.DBus.Properties", member: member)
        message.setSender(caller)
        var w = message.writer()
        w.append(interface.rawValue)
        w.append(name)
        try rest(&w)
        let before = sink.sent.count
        server.handle(message)
        return sink.sent[before...].last { $0.message.kind == .methodReturn || $0.message.kind == .error }?.message
    }

    func increment(_ sender: String) throws { try call(sender, ActivityMember.Method.incrementActivityCount.rawValue) }
    func decrement(_ sender: String) throws { try call(sender, ActivityMember.Method.decrementActivityCount.rawValue) }

    // MARK: reading what was sent

    var signals: [(at: Double, message: Message)] { sink.sent.filter { $0.message.kind == .signal } }

    /// The Visible signal's values, with their times.
    var visible: [(at: Double, value: Bool)] {
        signals.compactMap { entry in
            guard entry.message.interface == NetActivityInterface.activity.rawValue,
                entry.message.member == ActivityMember.Signal.visible.rawValue
            else { return nil }
            var r = entry.message.reader()
            return (try? r.read(Bool.self)).map { (entry.at, $0) }
        }
    }

    /// PropertiesChanged of `interface` at `path`: each signal's changed properties with values.
    func changes(_ interface: NetActivityInterface, at path: String = NetActivityBus.objectPath)
        -> [(at: Double, values: [String: DBusValue])]
    {
        signals.compactMap { entry in
            guard entry.message.member == "PropertiesChanged", entry.message.path == path else { return nil }
            var r = entry.message.reader()
            guard (try? r.read(String.self)) == interface.rawValue, let values = try? r.readVardict() else {
                return nil
            }
            return (entry.at, values)
        }
    }

    /// PropertiesChanged of `interface` at `path`: each signal's invalidated names.
    func invalidations(_ interface: NetActivityInterface, at path: String = NetActivityBus.objectPath) -> [(
        at: Double, names: [String]
    )] {
        signals.compactMap { entry in
            guard entry.message.member == "PropertiesChanged", entry.message.path == path else { return nil }
            var r = entry.message.reader()
            guard (try? r.read(String.self)) == interface.rawValue, (try? r.readVardict()) != nil,
                let names = try? r.readValue().arrayElements?.compactMap(\.stringValue), !names.isEmpty
            else { return nil }
            return (entry.at, names)
        }
    }

    /// ObjectManager signals (InterfacesAdded/Removed) naming `path`, with their times.
    func objectManagerSignals(for path: String) -> [(at: Double, member: String)] {
        signals.compactMap { entry in
            guard entry.message.interface == "org.freedesktop.DBus.ObjectManager", let member = entry.message.member
            else { return nil }
            var r = entry.message.reader()
            guard (try? r.readObjectPath()) == path else { return nil }
            return (entry.at, member)
        }
    }
}
