// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract
import NetActivityCore
import Testing

@testable import NetActivityAgent

/// The four interface tables as `BusService` builds them from the contract, driven through the
/// object server as a bus would: every property answers with the XML's type, every writable one
/// is the host's alone to set, and every method checks its arguments against the XML's.
@Suite("Interface tables built from the contract")
struct BusTableTests {
    static let host = ":1.50"
    static let sandboxed = ":1.51"

    /// Each interface of the contract, with the path of an object that serves it.
    func objects(_ h: DriverHarness) throws -> [(NetActivityInterface, String, any ContractInterface.Type)] {
        let reply = try h.call(Self.host, ActivityMember.Method.beginTask.rawValue) { w in
            w.append("tables")
            try w.appendVardict([:])
        }
        var r = try #require(reply).reader()
        let task = try r.readObjectPath()
        return [
            (.activity, NetActivityBus.objectPath, ActivityMember.self),
            (.imageCache, NetActivityBus.objectPath, ImageCacheMember.self),
            (.downloader, NetActivityBus.objectPath, DownloaderMember.self),
            (.task, task, TaskMember.self),
        ]
    }

    func harness() -> DriverHarness {
        let h = DriverHarness()
        h.peers.identities[Self.sandboxed] = ClientIdentity(app: "flatpak:org.example.Viewer", isSandboxed: true)
        return h
    }

    func properties(_ member: any ContractInterface.Type) -> [any ContractProperty] {
        func all<M: ContractInterface>(_: M.Type) -> [any ContractProperty] { Array(M.Property.allCases) }
        return all(member)
    }

    func methods(_ member: any ContractInterface.Type) -> [any ContractMethod] {
        func all<M: ContractInterface>(_: M.Type) -> [any ContractMethod] { Array(M.Method.allCases) }
        return all(member)
    }

    @Test("every property of the XML answers Get with the XML's type")
    func everyPropertyHasItsType() throws {
        let h = harness()
        for (interface, path, member) in try objects(h) {
            for property in properties(member) {
                let value = try h.property(path, interface, property.rawValue, caller: Self.host)
                #expect(value?.signature == property.signature, "\(interface.rawValue).\(property.rawValue)")
            }
        }
    }

    @Test("a writable property is the host's to set; a sandboxed app is denied and the value stays")
    func writablePropertiesAreTheHosts() throws {
        let h = harness()
        var writable = 0
        for (interface, path, member) in try objects(h) {
            for property in properties(member) {
                let name = "\(interface.rawValue).\(property.rawValue)"
                let value = try #require(try h.property(path, interface, property.rawValue, caller: Self.host))
                guard property.isWritable else {
                    let refused = try h.setProperty(path, interface, property.rawValue, value, caller: Self.host)
                    #expect(refused?.errorName == "org.freedesktop.DBus.Error.PropertyReadOnly", "\(name)")
                    continue
                }
                writable += 1
                let denied = try h.setProperty(path, interface, property.rawValue, value, caller: Self.sandboxed)
                #expect(denied?.errorName == NetActivityError.Name.accessDenied.rawValue, "\(name)")
                // The host reaches the setter (this harness decodes nothing: the decoded tier's
                // limits answer that).
                let same = try h.setProperty(path, interface, property.rawValue, value, caller: Self.host)
                let reached = same?.kind == .methodReturn || same?.errorName == NetActivityError.Name.decode.rawValue
                #expect(reached, "\(name): \(same?.errorName ?? "")")
                #expect(try h.property(path, interface, property.rawValue, caller: Self.host) == value, "\(name)")
            }
        }
        #expect(writable > 0, "the contract has writable properties")
    }

    @Test("every method of the XML refuses arguments of another signature than the XML's")
    func everyMethodChecksItsArguments() throws {
        let h = harness()
        for (interface, path, member) in try objects(h) {
            for method in methods(member) {
                // One argument more than the XML declares, of a type none of them has.
                let reply = try h.call(Self.host, method.rawValue, path: path, interface: interface) { w in
                    for argument in method.inArguments where argument.signature == "s" { w.append("x") }
                    w.append(Int16(7))
                }
                #expect(reply?.errorName == "org.freedesktop.DBus.Error.InvalidArgs", "\(method.rawValue)")
            }
        }
    }
}
