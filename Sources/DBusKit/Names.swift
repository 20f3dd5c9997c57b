// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus

/// Validation of the names the D-Bus specification defines. libdbus aborts the process when it is
/// handed an invalid name, so every name that comes from outside passes through these first.
public enum DBusNames {
    public static func isValidObjectPath(_ s: String) -> Bool {
        s.withCString { dbus_validate_path($0, nil) != 0 }
    }
    public static func isValidInterface(_ s: String) -> Bool {
        s.withCString { dbus_validate_interface($0, nil) != 0 }
    }
    public static func isValidMember(_ s: String) -> Bool {
        s.withCString { dbus_validate_member($0, nil) != 0 }
    }
    public static func isValidBusName(_ s: String) -> Bool {
        s.withCString { dbus_validate_bus_name($0, nil) != 0 }
    }
    public static func isValidErrorName(_ s: String) -> Bool {
        s.withCString { dbus_validate_error_name($0, nil) != 0 }
    }
    public static func isValidSignature(_ s: String) -> Bool {
        s.withCString { dbus_signature_validate($0, nil) != 0 }
    }
    /// One complete type, as a variant or an array element needs.
    public static func isValidSingleSignature(_ s: String) -> Bool {
        s.withCString { dbus_signature_validate_single($0, nil) != 0 }
    }
    /// Strings on the wire are UTF-8 without NUL. Swift strings are always valid UTF-8.
    public static func isValidWireString(_ s: String) -> Bool {
        !s.utf8.contains(0)
    }
}
