// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract
import NetActivityCore

/// `org.example.NetActivity` (dbus/org.example.NetActivity.xml): its table and handlers.
extension ActivityService: BusService {
    typealias Member = ActivityMember

    // MARK: the interface table

    func handle(_ method: Member.Method, _ call: inout MethodCall) throws {
        switch method {
        case .incrementActivityCount: try incrementActivityCount(&call)
        case .decrementActivityCount: decrementActivityCount(&call)
        case .beginActivity: try beginActivity(&call)
        case .beginTask: try beginTask(&call)
        case .accounts: try accounts(&call)
        }
    }

    static func property(_ property: Member.Property) -> BusProperty<ActivityService> {
        switch property {
        case .version: .version
        case .enabled: .readwrite({ s, w in w.append(s.machine.isEnabled) }) { s, r in s.setEnabled(try r.read()) }
        case .visible: .read { s, w in w.append(s.machine.isVisible) }
        case .state: .read { s, w in w.append(s.machine.state.rawValue) }
        case .activityCount: .read { s, w in w.append(UInt32(clamping: s.ledger.total)) }
        case .activationDelay: delay(.activationDelay, \.activationDelay)
        case .completionDelay: delay(.completionDelay, \.completionDelay)
        case .clients: .read { s, w in s.writeClients(&w) }
        // Free text of the apps' own: announced as invalidated, never with the value, so that each
        // reader's Get passes the trust rule (a sandboxed app reads its own rows).
        case .reasons: .read { s, w in s.writeReasons(&w, for: s.context.peers.identity(of: s.context.server.caller)) }
        }
    }

    private static func delay(
        _ property: Member.Property, _ keyPath: WritableKeyPath<ActivityIndicatorStateMachine, Duration>
    ) -> BusProperty<ActivityService> {
        .readwrite({ s, w in w.append(s.machine[keyPath: keyPath].seconds) }) { s, r in
            try s.setDelay(property, keyPath, seconds: try r.read(Double.self))
        }
    }

    // MARK: handlers

    func incrementActivityCount(_ call: inout MethodCall) throws {
        try acquire(.count, for: call.sender)
    }

    func decrementActivityCount(_ call: inout MethodCall) {
        // Only the caller's own count; at zero this is a no-op, never an error.
        release(.count, for: call.sender)
    }

    func beginActivity(_ call: inout MethodCall) throws {
        let reason = try call.args.read(String.self)
        try beginLease(for: call.sender, reason: reason, reply: &call.reply)
    }

    func beginTask(_ call: inout MethodCall) throws {
        let description = try call.args.read(String.self)
        let options = try call.args.readVardict()
        guard let tasks else { throw NetActivityError.failed("Tasks are not served") }
        let path = try tasks.beginTask(for: call.sender, description: description, options: options)
        try call.reply.appendObjectPath(path)
    }

    /// What apps hold of each budget: the host's to read (what an app holds is its own business).
    func accounts(_ call: inout MethodCall) throws {
        let app = try call.args.read(String.self)
        guard app.utf8.count <= NetActivityLimits.maxAppNameBytes else {
            throw NetActivityError.invalidArgs(
                "App name is \(app.utf8.count) bytes long; the limit is \(NetActivityLimits.maxAppNameBytes)")
        }
        let caller = context.peers.identity(of: call.sender)
        guard !caller.isSandboxed else {
            throw NetActivityError.accessDenied("What apps hold is for host apps to read; \(caller.refusedAs) may not")
        }
        let rows = context.accounts.holdings(of: app.isEmpty ? nil : app)
        call.reply.appendArray(elementSignature: "(sstttt)") { a in
            for row in rows {
                a.appendStruct { s in
                    s.append(row.app)
                    s.append(row.resource.rawValue)
                    s.append(row.held)
                    s.append(row.share)
                    s.append(row.budget)
                    s.append(row.limit)
                }
            }
        }
    }

    func writeClients(_ w: inout MessageWriter) {
        w.appendArray(elementSignature: "(ssu)") { a in
            for c in ledger.activeClients {
                a.appendStruct { s in
                    s.append(c.name)
                    s.append(c.processName)
                    s.append(c.count)
                }
            }
        }
    }

    /// Each client's lease reasons, for `caller`: everyone's for a host app, only those of its
    /// own app's clients for a sandboxed one.
    func writeReasons(_ w: inout MessageWriter, for caller: ClientIdentity) {
        w.appendArray(elementSignature: "{sas}") { a in
            for (client, reasons) in reasonsByClient().sorted(by: { $0.key < $1.key })
            where !caller.isSandboxed || context.peers.identity(of: client).leaf == caller.leaf {
                a.appendDictEntry { e in
                    e.append(client)
                    e.appendArray(elementSignature: "s") { list in for reason in reasons { list.append(reason) } }
                }
            }
        }
    }
}
