// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Testing

/// A large GetManagedObjects reply is built a slice per turn of the loop; objects in it that change
/// or go before it is sent are told to the caller again right after it.
@Suite("GetManagedObjects in slices")
struct ManagedObjectsTests {
    final class Sink: MessageSink {
        let uniqueName = ":1.1"
        var sent: [Message] = []
        func send(_ message: Message) { sent.append(message) }
    }

    final class Counter {
        var value: UInt32 = 0
    }

    func object(_ counter: Counter) -> DBusInterface {
        DBusInterface("org.example.O", properties: [DBusProperty("N", "u") { w, _ in w.append(counter.value) }])
    }

    @Test(
        "a reply of 600 objects takes five slices, one per turn; a change and a removal meanwhile are corrected after it"
    )
    func slices() throws {
        let sink = Sink()
        let server = ObjectServer(sink: sink)
        var turns: [() -> Void] = []
        server.runLater = { turns.append($0) }
        server.export(path: "/m", interfaces: [])
        server.addObjectManager(at: "/m")
        let counters = (0..<600).map { _ in Counter() }
        for (i, c) in counters.enumerated() { server.export(path: "/m/o\(i)", interfaces: [object(c)]) }
        sink.sent.removeAll()
        let call = try Message.methodCall(
            destination: ":1.1", path: "/m", interface: "org.freedesktop.DBus.ObjectManager",
            member: "GetManagedObjects")
        call.setSender(":1.9")
        server.handle(call)
        #expect(sink.sent.isEmpty, "nothing sent after the first slice")
        #expect(turns.count == 1)
        var ran = 0
        while !turns.isEmpty {
            let next = turns.removeFirst()
            if ran == 0 {
                // Between slices: every object changes, one goes, one comes.
                for c in counters { c.value = 7 }
                for i in 0..<600 {
                    server.emitPropertiesChanged(path: "/m/o\(i)", interface: "org.example.O", changed: ["N"])
                }
                server.unexport(path: "/m/o0")
                server.export(path: "/m/new", interfaces: [object(Counter())])
            }
            next()
            ran += 1
        }
        #expect(ran == 600 / ObjectServer.managedSlice, "one turn per slice after the first")
        let replyIndex = try #require(sink.sent.firstIndex { $0.member == nil && $0.errorName == nil })
        var r = sink.sent[replyIndex].reader()
        guard case .dict(_, _, let objects) = try r.readValue() else {
            Issue.record("not a dict")
            return
        }
        var values: [String: UInt32] = [:]
        for (key, value) in objects {
            guard case .objectPath(let path) = key, case .dict(_, _, let ifaces) = value,
                case .dict(_, _, let props)? = ifaces.first?.1,
                case .variant(.uint32(let n))? = props.first?.1
            else { continue }
            values[path] = n
        }
        let o0Sent = values["/m/o0"] != nil
        #expect(values["/m/new"] == nil, "an object that came later was announced before the reply, not in it")
        #expect(values.count == 599 + (o0Sent ? 1 : 0))
        let stale = values.filter { $0.value == 0 }.map(\.key)
        #expect(stale.count == ObjectServer.managedSlice, "the first slice went out before the change")
        // After the reply, to the caller only: a full PropertiesChanged for each stale object still
        // there, and InterfacesRemoved for o0 if the reply carried it.
        let after = Array(sink.sent[(replyIndex + 1)...])
        #expect(after.allSatisfy { $0.destination == ":1.9" })
        #expect(
            Set(after.filter { $0.member == "PropertiesChanged" }.compactMap(\.path))
                == Set(stale).subtracting(["/m/o0"]))
        #expect(after.filter { $0.member == "InterfacesRemoved" }.count == (o0Sent ? 1 : 0))
    }
}
