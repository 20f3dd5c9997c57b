// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus
import DequeModule
import Glibc
public import LinuxKit

/// Where outgoing messages go: a bus connection, or a recorder in tests. The object server and
/// signal emission need nothing more, so the services above them run with no bus in their tests.
public protocol MessageSink: AnyObject {
    /// Our unique name on the bus (the sender of what we emit).
    var uniqueName: String { get }
    func send(_ message: Message)
}

extension MessageSink {
    /// Emits a signal from `path`. `destination` makes it unicast.
    public func emitSignal(
        path: String, interface: String, member: String, destination: String? = nil,
        _ body: (inout MessageWriter) throws -> Void = { _ in }
    ) rethrows {
        guard let message = try? Message.signal(path: path, interface: interface, member: member) else { return }
        if let destination { try? message.setDestination(destination) }
        var writer = message.writer()
        try body(&writer)
        send(message)
    }
}

/// A private connection to a message bus, driven by an `EventLoop` on one thread.
///
/// (This file is long on purpose: it holds the connection's state and every libdbus callback that
/// touches it, since most of that state is read with the runtime's exclusivity checks off, which
/// is safe only while every access stays on the one thread and in sight of the others. Calls on
/// the bus daemon are in Connection+BusDaemon.swift, signal matching in SignalMatch.swift.)
///
/// The loop honours every libdbus watch (with its enabled flag) and timeout, and dispatches
/// after each batch of I/O. libdbus calls the watch and timeout functions with the connection
/// lock held, so they only update our tables and epoll; they never call back into libdbus.
/// (The loop's half, watches, timeouts and dispatching, is Connection+EventLoop.swift.)
public final class Connection: MessageSink {
    let raw: OpaquePointer
    /// Our unique name: set by the bus's answer to Hello ("" until then, with `.later`).
    public private(set) var uniqueName: String
    /// The loop it is attached to. Its registrations (the socket's watch, libdbus's timeouts,
    /// the prepare hook) reach the connection without counting a reference (the runtime's
    /// unowned and weak references cost a slow path on every call), so `close()` and `deinit`
    /// take them all back before the connection can go.
    var loop: EventLoop?
    var prepareHook: EventLoop.HookID?
    // The state below is touched only on the connection's thread, by accesses that never span
    // a call back into it: the runtime's exclusivity checks (a few percent of a bus call's
    // cost) are off for what every message touches.

    /// libdbus's watches by fd: one socket with a read and a write watch, in practice, so a
    /// short list searched in order (cheaper per event than hashing the fd).
    @exclusivity(unchecked) var watchesByFD: [(fd: Int32, watches: [OpaquePointer])] = []
    var timeouts: [OpaquePointer: EventLoop.TimerID] = [:]
    private var signalSubscriptions: [(id: Int, match: SignalMatch, handler: (Message) -> Void)] = []
    private var nextSubscriptionID = 0
    @exclusivity(unchecked) var closed = false
    /// Whether libdbus holds incoming messages not yet dispatched. Its dispatch-status function
    /// keeps this up to date (it is called whenever the status changes), so a loop turn with
    /// nothing to dispatch costs no call into libdbus.
    @exclusivity(unchecked) var dispatchPending = true
    /// The libdbus timeout whose timer is running its handler now.
    var firingTimeout: OpaquePointer?

    /// Receives every method call addressed to us (the object server installs itself here).
    @exclusivity(unchecked) public var methodCallHandler: ((Message) -> Void)?
    /// Called once when the bus connection is lost.
    public var onDisconnect: (() -> Void)?

    /// libdbus aborts the process when a check on its API fails. An agent that serves the whole
    /// session should log and carry on instead: this turns such checks into warnings. Call it
    /// before the first libdbus call.
    public static func makeLibdbusChecksNonFatal() {
        setenv("DBUS_FATAL_WARNINGS", "0", 0)
    }

    /// The session bus address: `$DBUS_SESSION_BUS_ADDRESS`, else the bus that activated us
    /// (`$DBUS_STARTER_ADDRESS` when `$DBUS_STARTER_BUS_TYPE` is session), else `$XDG_RUNTIME_DIR/bus`
    /// if it exists.
    public static func sessionBusAddress() -> String? {
        func env(_ name: String) -> String? {
            getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        if let a = env("DBUS_SESSION_BUS_ADDRESS") { return a }
        if let a = env("DBUS_STARTER_ADDRESS"), (env("DBUS_STARTER_BUS_TYPE") ?? "session") == "session" { return a }
        if let dir = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !dir.isEmpty {
            let path = dir + "/bus"
            var st = stat()
            if stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK { return "unix:path=" + path }
        }
        return nil
    }

    /// When the bus hears our Hello: before `init` returns (blocking until it answers), or
    /// `later`, through `register` once the connection is on an event loop.
    public enum Registration: Sendable { case blocking, later }

    /// Connects to the bus at `address` (nil: the session bus). With `.blocking` (the default),
    /// also registers with it, waiting for its answer; with `.later` nothing is sent or waited
    /// for (a unix socket's connect only; libdbus authenticates through the loop): call
    /// `register`, then queue other messages, which the bus handles after the Hello.
    public init(address: String? = nil, registering: Registration = .blocking) throws(DBusError) {
        guard let address = address ?? Connection.sessionBusAddress() else {
            throw .notSupported(
                "No session bus: DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus does not exist")
        }
        let conn = try withDBusError { err in dbus_connection_open_private(address, err) }
        guard let conn else { throw .failed("Could not connect to \(address)") }
        dbus_connection_set_exit_on_disconnect(conn, 0)
        if registering == .blocking {
            do {
                _ = try withDBusError { err in dbus_bus_register(conn, err) }
            } catch {
                dbus_connection_close(conn)
                dbus_connection_unref(conn)
                throw error
            }
        }
        raw = conn
        uniqueName = dbus_bus_get_unique_name(conn).map { String(cString: $0) } ?? ""
        installFilter()
        installDispatchStatusFunction()
    }

    /// Says Hello to the bus without waiting (for a connection opened with `.later` and attached
    /// to a loop): `done` hears our unique name, or why the bus did not give one (a stalled bus
    /// answers when it resumes, or NoReply after `timeoutMilliseconds`).
    public func register(timeoutMilliseconds: Int32 = 25_000, _ done: @escaping (Result<String, DBusError>) -> Void) {
        busCallAsync("Hello", timeoutMilliseconds: timeoutMilliseconds) { [weak self] result in
            guard let self else { return }
            switch result {
            case .failure(let e):
                done(.failure(e))
            case .success(let reply):
                var r = reply.reader()
                guard let name = try? r.read(String.self), dbus_bus_set_unique_name(raw, name) != 0 else {
                    return done(.failure(.failed("The bus answered Hello without a unique name")))
                }
                uniqueName = name
                done(.success(name))
            }
        }
    }

    deinit {
        lastSenderBytes.deallocate()
        detach()
        if !closed { dbus_connection_close(raw) }
        dbus_connection_unref(raw)
    }

    /// Takes back everything registered with the loop.
    private func detach() {
        if let loop {
            for entry in watchesByFD { loop.unwatch(fd: entry.fd) }
            for id in timeouts.values { loop.cancel(id) }
            if let prepareHook { loop.removePrepareHook(prepareHook) }
        }
        prepareHook = nil
        watchesByFD = []
        timeouts = [:]
    }

    /// Closes the connection; later sends fail quietly.
    public func close() {
        guard !closed else { return }
        closed = true
        detach()
        dbus_connection_close(raw)
    }

    public var isConnected: Bool { !closed && dbus_connection_get_is_connected(raw) != 0 }

    public var canPassFileDescriptors: Bool { dbus_connection_can_send_type(raw, CDBUS_TYPE_UNIX_FD) != 0 }

    /// While more than this many bytes wait to be written to the bus, no further incoming message
    /// is dispatched: a burst of large replies (a client asking for a big image hundreds of times)
    /// then waits in the bus daemon's queue for that client, not in our memory. Dispatching resumes
    /// when the socket has taken enough (each write is followed by `dispatchAll`); meanwhile libdbus
    /// keeps incoming messages up to its own received-size limit and then stops reading.
    @exclusivity(unchecked) public var maxOutgoingBytes = 4 << 20

    /// An upper bound on libdbus's outgoing queue in bytes, kept without asking libdbus (which
    /// takes the connection's lock, a few hundred instructions a call): the size last read, plus
    /// every message queued since (`Message.queuedBound`) and an allowance for each message
    /// dispatched (libdbus answers some itself, such as Peer.Ping). The queue is read again only
    /// when the bound reaches `maxOutgoingBytes`.
    @exclusivity(unchecked) private var outgoingBound = 0
    static let dispatchAllowance = 1024

    private func outgoingBelowLimit() -> Bool {
        if outgoingBound < maxOutgoingBytes { return true }
        outgoingBound = Int(dbus_connection_get_outgoing_size(raw))
        return outgoingBound < maxOutgoingBytes
    }

    /// Incoming messages wait: in libdbus's queue, or handed back with `redeliver`.
    var hasQueued: Bool { dispatchPending || !redelivered.isEmpty }

    /// Dispatches every queued incoming message (as long as the outgoing queue is below
    /// `maxOutgoingBytes`): first the method calls handed back with `redeliver`, in order, then
    /// libdbus's queue.
    public func dispatchAll() {
        defer {
            if !withDescriptors.isEmpty {
                Message.releaseOffThread(withDescriptors)
                withDescriptors.removeAll(keepingCapacity: true)
            }
        }
        while !closed, hasQueued, outgoingBelowLimit() {
            if let message = redelivered.popFirst() {
                methodCallHandler?(message)
                continue
            }
            guard dispatchPending else { break }
            outgoingBound &+= Self.dispatchAllowance
            // The message dispatched may have handed calls back: the loop's condition sees them.
            if dbus_connection_dispatch(raw) != DBUS_DISPATCH_DATA_REMAINS, redelivered.isEmpty { break }
        }
    }

    /// Method calls a handler held back (the agent's, until it knows the caller's app), handed
    /// back to be dispatched again, in order, under the same limit on the outgoing queue as
    /// everything else: a burst of held calls cannot queue more replies than fresh ones could.
    @exclusivity(unchecked) private var redelivered: Deque<Message> = []

    /// Hands a held method call back to `methodCallHandler`, after the ones handed back before
    /// it and before any message not yet dispatched.
    public func redeliver(_ message: Message) {
        redelivered.append(message)
    }

    // MARK: incoming messages

    /// The last sender read, as its bytes (a bus name has at most 255) and as a string: a burst
    /// of calls from one client (the common case) makes the string once, not once per call.
    private let lastSenderBytes: UnsafeMutablePointer<CChar> = {
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: 256)
        p.initialize(repeating: 0, count: 256)
        return p
    }()
    @exclusivity(unchecked) private var lastSender = ""

    /// `message.sender`, made once for a run of messages from the same sender (on the
    /// connection's thread).
    public func sender(of message: Message) -> String? {
        guard let cString = dbus_message_get_sender(message.raw) else { return nil }
        if strcmp(lastSenderBytes, cString) == 0 { return lastSender }
        let name = String(cString: cString)
        if strlen(cString) < 256 {
            strcpy(lastSenderBytes, cString)
            lastSender = name
        }
        return name
    }

    private func installFilter() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = dbus_connection_add_filter(
            raw,
            { _, msg, data in
                Unmanaged<Connection>.fromOpaque(data!)._withUnsafeGuaranteedRef { $0.filter(msg!) }
            }, me, nil)
    }

    /// Calls with descriptors dispatched in this `dispatchAll`, held until it ends (see `filter`).
    @exclusivity(unchecked) private var withDescriptors: [OpaquePointer] = []

    /// The wrapper of the last method call, for the next (see `filter`).
    @exclusivity(unchecked) private var spareMessage: Message?

    private func filter(_ raw: OpaquePointer) -> DBusHandlerResult {
        switch dbus_message_get_type(raw) {
        case CDBUS_MESSAGE_TYPE_METHOD_CALL:
            guard let handler = methodCallHandler else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
            // A call carrying descriptors is held once more, and let go on the closer's thread
            // after libdbus lets go of it: the last reference, which closes them, is never the loop's.
            if dbus_message_contains_unix_fds(raw) != 0 {
                dbus_message_ref(raw)
                withDescriptors.append(raw)
            }
            // The call is lent to the handler (see `Message.init(lending:)`), in the wrapper of
            // the previous call when that one was not kept.
            // (The wrapper stays in `spareMessage` throughout: checked there, the handler's
            // reference is surely gone, where a local copy let the optimizer keep one.)
            if let spare = spareMessage {
                spare.relend(raw)
            } else {
                spareMessage = Message(lending: raw)
            }
            handler(spareMessage!)
            let kept = !isKnownUniquelyReferenced(&spareMessage!)
            if !spareMessage!.endLoan(heldElsewhere: kept) { spareMessage = nil }
            return DBUS_HANDLER_RESULT_HANDLED
        case CDBUS_MESSAGE_TYPE_SIGNAL:
            if dbus_message_is_signal(raw, "org.freedesktop.DBus.Local", "Disconnected") != 0 {
                let callback = onDisconnect
                onDisconnect = nil
                callback?()
                return DBUS_HANDLER_RESULT_HANDLED
            }
            if signalSubscriptions.isEmpty { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
            let message = Message(borrowing: raw)
            for sub in signalSubscriptions where sub.match.matches(raw) { sub.handler(message) }
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        default:
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
    }

    /// Calls `handler` for each incoming signal that matches. This only filters what arrives; use
    /// `addMatch` to ask the bus to route broadcast signals to us.
    @discardableResult
    public func onSignal(_ match: SignalMatch, _ handler: @escaping (Message) -> Void) -> Int {
        nextSubscriptionID += 1
        signalSubscriptions.append((nextSubscriptionID, match, handler))
        return nextSubscriptionID
    }

    public func removeSignalHandler(_ id: Int) {
        signalSubscriptions.removeAll { $0.id == id }
    }

    // MARK: outgoing messages

    /// Queues a message; libdbus writes it at once when the socket allows, else when writable.
    /// A message the bus would disconnect us for is never sent: a method return becomes a
    /// `LimitsExceeded` error reply saying why, anything else is dropped (and counted).
    public func send(_ message: Message) {
        guard !closed else { return }
        if !silenced.isEmpty, let d = dbus_message_get_destination(message.raw), silenced.contains(String(cString: d)) {
            droppedForSilenced += 1
            return
        }
        if let problem = message.busLimitViolation {
            oversizedMessages += 1
            return sendErrorInPlace(of: message, .limitsExceeded("The reply would hold \(problem); ask for less"))
        }
        // A body marshalled here goes to libdbus now (after the size check: one too big for the
        // bus is never built). One it refused (a fault of ours) is never sent half-empty.
        guard message.finishWire() else {
            unmarshallableMessages += 1
            return sendErrorInPlace(of: message, .failed("The reply could not be marshalled"))
        }
        let bound = message.queuedBound
        outgoingBound &+= bound
        sentBound &+= bound
        if sentBound >= nextVolumeMark { volumeReached() }
        if bound >= Self.largeMessageBytes, let onLargeMessage, let d = dbus_message_get_destination(message.raw) {
            onLargeMessage(String(cString: d), bound)
        }
        _ = dbus_connection_send(raw, message.raw, nil)
    }

    /// Messages from this size on (an upper bound) are reported, with their destination, to
    /// `onLargeMessage` as they are sent, so the owner can tell a peer that does not read them.
    public static let largeMessageBytes = 64 * 1024
    public var onLargeMessage: ((_ destination: String, _ bytes: Int) -> Void)?

    /// Peers that do not read what they are sent (the owner decides, from the bus daemon's view
    /// of their queues): replies and unicast signals to them are dropped, not queued in the bus,
    /// where they would count against what the daemon lets us have in flight for everyone.
    @exclusivity(unchecked) public var silenced: Set<String> = []
    /// Messages dropped because their destination was silenced.
    public private(set) var droppedForSilenced = 0

    /// Called (on the next turn of the loop, never inside `send`) each time another `volumeStep`
    /// bytes have been sent: the owner's cue to ask the daemon whether they are being read.
    public var onVolume: (() -> Void)?
    public var volumeStep = 16 << 20
    /// Bytes handed to libdbus so far (each message's upper bound).
    @exclusivity(unchecked) private var sentBound = 0
    @exclusivity(unchecked) private var nextVolumeMark = 16 << 20
    private var volumeScheduled = false

    private func volumeReached() {
        nextVolumeMark = sentBound &+ volumeStep
        guard let onVolume, !volumeScheduled, let loop else { return }
        volumeScheduled = true
        _ = loop.schedule(afterNanoseconds: 0) { [weak self] in
            self?.volumeScheduled = false
            onVolume()
        }
    }

    /// Calls a method on the bus daemon itself (`org.freedesktop.DBus`, or another of its
    /// interfaces: its Debug.Stats, say), answering through the event loop (`busCall` is the
    /// blocking twin).
    public func busCallAsync(
        _ member: String, interface: String = "org.freedesktop.DBus", timeoutMilliseconds: Int32 = 25_000,
        _ body: (inout MessageWriter) -> Void = { _ in }, _ completion: @escaping (Result<Message, DBusError>) -> Void
    ) {
        guard
            let m = try? Message.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: interface, member: member
            )
        else { return completion(.failure(.failed("Could not build a call to \(member)"))) }
        var w = m.writer()
        body(&w)
        callAsync(m, timeoutMilliseconds: timeoutMilliseconds, completion)
    }

    /// Messages `send` refused because the bus would have disconnected us for them.
    public private(set) var oversizedMessages = 0
    /// Messages `send` refused because libdbus would not load their body (always 0 unless the
    /// marshaller has a fault).
    public private(set) var unmarshallableMessages = 0

    /// A method return becomes `error` (same destination and reply serial); anything else is dropped.
    private func sendErrorInPlace(of message: Message, _ error: DBusError) {
        guard let reply = message.errorInPlace(error) else { return }
        outgoingBound &+= reply.queuedBound
        _ = dbus_connection_send(raw, reply.raw, nil)
    }

    /// A blocking call, for command-line tools and set-up. Error replies throw.
    public func call(_ message: Message, timeoutMilliseconds: Int32 = -1) throws(DBusError) -> Message {
        guard !closed else { throw .disconnected("The connection is closed") }
        let reply = try withDBusError { err in
            dbus_connection_send_with_reply_and_block(raw, message.raw, timeoutMilliseconds, err)
        }
        guard let reply else { throw .failed("No reply") }
        return Message(owning: reply)
    }

    /// A call whose reply (or error, or NoReply on timeout) arrives through the event loop.
    public func callAsync(
        _ message: Message, timeoutMilliseconds: Int32 = -1,
        _ completion: @escaping (Result<Message, DBusError>) -> Void
    ) {
        var pending: OpaquePointer? = nil
        outgoingBound &+= message.queuedBound
        guard !closed, dbus_connection_send_with_reply(raw, message.raw, &pending, timeoutMilliseconds) != 0,
            let pending
        else {
            completion(.failure(.disconnected("Not connected to the bus")))
            return
        }
        let box = Unmanaged.passRetained(ReplyBox(completion)).toOpaque()
        _ = dbus_pending_call_set_notify(
            pending,
            { pending, data in
                guard let pending, let reply = dbus_pending_call_steal_reply(pending) else { return }
                let message = Message(owning: reply)
                let box = Unmanaged<ReplyBox>.fromOpaque(data!).takeUnretainedValue()
                if let error = message.asError {
                    box.completion(.failure(error))
                } else {
                    box.completion(.success(message))
                }
            }, box, { data in Unmanaged<ReplyBox>.fromOpaque(data!).release() })
        dbus_pending_call_unref(pending)
    }

}

private final class ReplyBox {
    let completion: (Result<Message, DBusError>) -> Void
    init(_ completion: @escaping (Result<Message, DBusError>) -> Void) { self.completion = completion }
}
