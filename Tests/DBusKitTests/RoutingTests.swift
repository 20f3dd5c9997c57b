// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Testing

/// The object server remembers recent routes by the bytes of (path, interface, member). A route
/// must never outlive the object it leads to, nor survive that object's replacement.
@Suite("Routing method calls")
struct RoutingTests {
    final class Sink: MessageSink {
        let uniqueName = ":1.1"
        var sent: [Message] = []
        func send(_ message: Message) { sent.append(message) }
    }

    func call(_ server: ObjectServer, _ sink: Sink, path: String, member: String) throws -> Message {
        let m = try Message.methodCall(destination: ":1.1", path: path, interface: "org.example.T", member: member)
        m.setSender(":1.9")
        server.handle(m)
        return try #require(sink.sent.last)
    }

    func interface(_ word: String, calls: @escaping () -> Void = {}) -> DBusInterface {
        DBusInterface(
            "org.example.T",
            methods: [
                DBusMethod("Say", out: [DBusArgument("word", "s")]) { call in
                    calls()
                    call.reply.append(word)
                }
            ])
    }

    func word(_ reply: Message) throws -> String {
        var r = reply.reader()
        return try r.read(String.self)
    }

    @Test("a remembered route follows its object: replaced, removed, and other objects' churn")
    func routesFollowObjects() throws {
        let sink = Sink()
        let server = ObjectServer(sink: sink)
        var firstCalls = 0
        server.export(path: "/a", interfaces: [interface("first") { firstCalls += 1 }])
        server.export(path: "/b", interfaces: [interface("bee")])
        for _ in 0..<3 { #expect(try word(call(server, sink, path: "/a", member: "Say")) == "first") }
        #expect(firstCalls == 3)
        // Other paths coming and going leave /a's route alone, and do not reach /a.
        server.export(path: "/c", interfaces: [interface("sea")])
        server.unexport(path: "/c")
        #expect(try word(call(server, sink, path: "/b", member: "Say")) == "bee")
        #expect(try word(call(server, sink, path: "/a", member: "Say")) == "first")
        // Replaced: the new object answers.
        server.export(path: "/a", interfaces: [interface("second")])
        #expect(try word(call(server, sink, path: "/a", member: "Say")) == "second")
        #expect(firstCalls == 4)
        // Removed: UnknownObject, not the old handler.
        server.unexport(path: "/a")
        #expect(
            try call(server, sink, path: "/a", member: "Say").errorName == "org.freedesktop.DBus.Error.UnknownObject")
        #expect(firstCalls == 4)
        // A member the route does not name is still refused by name.
        #expect(
            try call(server, sink, path: "/b", member: "Shout").errorName == "org.freedesktop.DBus.Error.UnknownMethod")
        // More routes than are kept: every call still reaches its own object.
        for i in 0..<20 { server.export(path: "/n\(i)", interfaces: [interface("n\(i)")]) }
        for round in 0..<2 {
            for i in 0..<20 {
                #expect(try word(call(server, sink, path: "/n\(i)", member: "Say")) == "n\(i)", "round \(round)")
            }
        }
    }
}
