// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus
import Glibc

/// Which incoming signals a handler wants; nil fields match anything.
public struct SignalMatch: Sendable {
    public var sender: String?
    public var path: String?
    public var interface: String?
    public var member: String?

    public init(sender: String? = nil, path: String? = nil, interface: String? = nil, member: String? = nil) {
        self.sender = sender
        self.path = path
        self.interface = interface
        self.member = member
    }

    func matches(_ raw: OpaquePointer) -> Bool {
        func eq(_ want: String?, _ got: UnsafePointer<CChar>?) -> Bool {
            guard let want else { return true }
            guard let got else { return false }
            return want.withCString { strcmp($0, got) == 0 }
        }
        return eq(member, dbus_message_get_member(raw)) && eq(interface, dbus_message_get_interface(raw))
            && eq(path, dbus_message_get_path(raw)) && eq(sender, dbus_message_get_sender(raw))
    }

    /// The bus daemon's NameOwnerChanged(name, old_owner, new_owner).
    public static let nameOwnerChanged = SignalMatch(
        sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
        member: "NameOwnerChanged")

    /// The arguments of a NameOwnerChanged signal (nil for any other message).
    public static func nameOwnerChange(_ message: Message) -> (name: String, oldOwner: String, newOwner: String)? {
        guard message.member == "NameOwnerChanged" else { return nil }
        var r = message.reader()
        guard let name = try? r.read(String.self), let old = try? r.read(String.self),
            let new = try? r.read(String.self)
        else { return nil }
        return (name, old, new)
    }

    /// The bus match rule for this filter.
    public var rule: String {
        var parts = ["type='signal'"]
        if let sender { parts.append("sender='\(sender)'") }
        if let path { parts.append("path='\(path)'") }
        if let interface { parts.append("interface='\(interface)'") }
        if let member { parts.append("member='\(member)'") }
        return parts.joined(separator: ",")
    }
}
