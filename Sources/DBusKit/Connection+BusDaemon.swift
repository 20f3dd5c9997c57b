// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus

/// Calls on the bus daemon itself: names and match rules.
extension Connection {
    public enum RequestNameResult: Sendable, Equatable { case primaryOwner, inQueue, exists, alreadyOwner }

    /// RequestName's flags: never queued; `replace` takes the name from its owner if it allows
    /// it, `allowReplacement` lets a later caller take it from us.
    private static func requestNameFlags(replace: Bool, allowReplacement: Bool) -> UInt32 {
        var flags = CDBUS_NAME_FLAG_DO_NOT_QUEUE
        if replace { flags |= CDBUS_NAME_FLAG_REPLACE_EXISTING }
        if allowReplacement { flags |= CDBUS_NAME_FLAG_ALLOW_REPLACEMENT }
        return UInt32(flags)
    }

    /// What RequestName's reply code says.
    private static func requestNameResult(_ code: Int32?) -> RequestNameResult {
        switch code {
        case CDBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER: .primaryOwner
        case CDBUS_REQUEST_NAME_REPLY_IN_QUEUE: .inQueue
        case CDBUS_REQUEST_NAME_REPLY_ALREADY_OWNER: .alreadyOwner
        default: .exists
        }
    }

    /// RequestName, blocking (for start-up).
    public func requestName(_ name: String, replace: Bool, allowReplacement: Bool) throws(DBusError)
        -> RequestNameResult
    {
        guard DBusNames.isValidBusName(name) else { throw .invalidArgs("Invalid bus name '\(name)'") }
        let flags = Self.requestNameFlags(replace: replace, allowReplacement: allowReplacement)
        return Self.requestNameResult(try withDBusError { err in dbus_bus_request_name(raw, name, flags, err) })
    }

    /// Asks the bus to route signals matching `rule` to us (blocking).
    public func addMatch(_ rule: String) throws(DBusError) {
        _ = try withDBusError { err in dbus_bus_add_match(raw, rule, err) }
    }

    /// Stops routing `rule`'s signals to us, without waiting (libdbus blocks only when asked for
    /// the error).
    public func removeMatch(_ rule: String) {
        dbus_bus_remove_match(raw, rule, nil)
    }

    /// Asks the bus to route `rule`'s signals to us without waiting for its answer (a bad rule is
    /// then only logged by the bus): for code that runs on the loop after start-up.
    public func addMatchWithoutWaiting(_ rule: String) {
        dbus_bus_add_match(raw, rule, nil)
    }

    /// RequestName through the event loop, with the flags `requestName` takes (none by default).
    public func requestNameAsync(
        _ name: String, replace: Bool = false, allowReplacement: Bool = false,
        _ done: @escaping (Result<RequestNameResult, DBusError>) -> Void
    ) {
        let flags = Self.requestNameFlags(replace: replace, allowReplacement: allowReplacement)
        busCallAsync(
            "RequestName", timeoutMilliseconds: 5000,
            { w in
                w.append(name)
                w.append(flags)
            }
        ) { result in
            done(
                result.map { reply in
                    var r = reply.reader()
                    return Self.requestNameResult((try? r.read(UInt32.self)).map(Int32.init))
                })
        }
    }

    /// Calls a method on the bus daemon itself.
    public func busCall(
        _ member: String, _ body: (inout MessageWriter) throws -> Void = { _ in }
    ) throws -> Message {
        let m = try Message.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus", member: member)
        var w = m.writer()
        try body(&w)
        return try call(m, timeoutMilliseconds: 25_000)
    }
}
