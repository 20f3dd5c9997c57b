// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus
import Glibc

/// org.freedesktop.DBus.Properties for every exported object: Get, GetAll and Set through the
/// interface tables, and PropertiesChanged.
extension ObjectServer {
    // MARK: org.freedesktop.DBus.Properties

    func lookupInterface(_ object: Object, _ name: String, path: String) throws(DBusError) -> DBusInterface {
        guard let table = object.interface(name) else {
            throw .unknownInterface("No such interface '\(name)' at object path '\(path)'")
        }
        return table
    }

    func lookupProperty(_ table: DBusInterface, _ name: String) throws(DBusError) -> DBusProperty {
        guard let property = table.properties[name] else {
            throw .unknownProperty("No such property '\(name)' in interface '\(table.name)'")
        }
        return property
    }

    func handleProperties(_ member: String, message: Message, path: String, object: Object) throws {
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
            throw DBusError.unknownMethod(
                "No such method '\(member)' in interface '\(ObjectServer.propertiesInterface)'")
        }
    }

    func appendEntry(_ a: inout MessageWriter, _ property: DBusProperty, path: String) throws {
        try a.appendDictEntry { e in
            e.append(property.name)
            try e.appendVariant(signature: property.signature) { v in try property.get(&v, path) }
        }
    }

    /// Emits `PropertiesChanged` for `names` of `interface` at `path`, with their current values.
    public func emitPropertiesChanged(
        path: String, interface: String, changed names: [String], invalidated: [String] = []
    ) {
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
    func emitPropertiesChanged(
        path: String, interface: String, invalidated: [String] = [], to destination: String? = nil,
        _ changed: (inout MessageWriter) throws -> Void
    ) {
        try? sink.emitSignal(
            path: path, interface: Self.propertiesInterface, member: "PropertiesChanged", destination: destination
        ) {
            w in
            w.append(interface)
            try w.appendArray(elementSignature: "{sv}", changed)
            w.appendArray(elementSignature: "s") { a in for name in invalidated { a.append(name) } }
        }
    }
}
