internal import CDBus

/// A D-Bus error: a name such as `org.freedesktop.DBus.Error.InvalidArgs` and a human message.
///
/// Handlers throw these; the dispatcher turns them into error replies. Any other Swift error thrown
/// by a handler becomes `org.freedesktop.DBus.Error.Failed` with its description.
public struct DBusError: Error, Equatable, Sendable, CustomStringConvertible {
    public var name: String
    public var message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { "\(name): \(message)" }

    public static func invalidArgs(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: message)
    }
    public static func accessDenied(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.AccessDenied", message: message)
    }
    public static func notSupported(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.NotSupported", message: message)
    }
    public static func failed(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.Failed", message: message)
    }
    public static func unknownMethod(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.UnknownMethod", message: message)
    }
    public static func unknownObject(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.UnknownObject", message: message)
    }
    public static func unknownInterface(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.UnknownInterface", message: message)
    }
    public static func unknownProperty(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.UnknownProperty", message: message)
    }
    public static func propertyReadOnly(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: message)
    }
    public static func limitsExceeded(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.LimitsExceeded", message: message)
    }
    public static func noReply(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.NoReply", message: message)
    }
    public static func disconnected(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.Disconnected", message: message)
    }

    /// Moves a filled libdbus `DBusError` into a Swift error and frees it. The one place that
    /// converts libdbus errors.
    static func take(_ error: inout CDBus.DBusError) -> DBusError {
        let name = error.name.map { String(cString: $0) } ?? "org.freedesktop.DBus.Error.Failed"
        let message = error.message.map { String(cString: $0) } ?? ""
        dbus_error_free(&error)
        return DBusError(name: name, message: message)
    }
}

/// Runs `body` with an initialised libdbus error and throws it when set.
func withDBusError<T>(_ body: (UnsafeMutablePointer<CDBus.DBusError>) -> T) throws(DBusError) -> T {
    var error = CDBus.DBusError()
    dbus_error_init(&error)
    let result = body(&error)
    if dbus_error_is_set(&error) != 0 {
        throw DBusError.take(&error)
    }
    return result
}
