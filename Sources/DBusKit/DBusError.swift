// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus

/// A D-Bus error: a name such as `org.freedesktop.DBus.Error.InvalidArgs` and a human message.
///
/// Handlers throw these; the dispatcher turns them into error replies. Any other Swift error thrown
/// by a handler becomes `org.freedesktop.DBus.Error.Failed` with its description. The standard
/// names come from libdbus's own table (`DBUS_ERROR_*` in dbus-protocol.h), never typed here.
public struct DBusError: Error, Equatable, Sendable, CustomStringConvertible {
    public var name: String
    public var message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { "\(name): \(message)" }

    public static func invalidArgs(_ message: String) -> DBusError {
        DBusError(name: DBUS_ERROR_INVALID_ARGS, message: message)
    }
    public static func accessDenied(_ message: String) -> DBusError {
        DBusError(name: DBUS_ERROR_ACCESS_DENIED, message: message)
    }
    public static func notSupported(_ message: String) -> DBusError {
        DBusError(name: DBUS_ERROR_NOT_SUPPORTED, message: message)
    }
    public static func failed(_ message: String) -> DBusError {
        DBusError(name: DBUS_ERROR_FAILED, message: message)
    }
    public static func unknownMethod(_ message: String) -> DBusError {
        DBusError(name: DBUS_ERROR_UNKNOWN_METHOD, message: message)
    }
    public static func unknownObject(_ message: String) -> DBusError {
        DBusError(name: DBUS_ERROR_UNKNOWN_OBJECT, message: message)
    }
    public static func unknownInterface(_ message: String) -> DBusError {
        DBusError(name: DBUS_ERROR_UNKNOWN_INTERFACE, message: message)
    }
    public static func unknownProperty(_ message: String) -> DBusError {
        DBusError(name: DBUS_ERROR_UNKNOWN_PROPERTY, message: message)
    }
    public static func propertyReadOnly(_ message: String) -> DBusError {
        DBusError(name: DBUS_ERROR_PROPERTY_READ_ONLY, message: message)
    }
    public static func limitsExceeded(_ message: String) -> DBusError {
        DBusError(name: DBUS_ERROR_LIMITS_EXCEEDED, message: message)
    }
    public static func noReply(_ message: String) -> DBusError {
        DBusError(name: DBUS_ERROR_NO_REPLY, message: message)
    }
    public static func disconnected(_ message: String) -> DBusError {
        DBusError(name: DBUS_ERROR_DISCONNECTED, message: message)
    }

    /// Moves a filled libdbus `DBusError` into a Swift error and frees it. The one place that
    /// converts libdbus errors.
    static func take(_ error: inout CDBus.DBusError) -> DBusError {
        let name = error.name.map { String(cString: $0) } ?? DBUS_ERROR_FAILED
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
