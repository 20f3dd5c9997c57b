// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import LinuxKit
import Testing

/// The connection lends each incoming method call to its handler without a reference of its own
/// and wraps the next call in the same object when the handler kept nothing. A call that a handler
/// does keep (the agent holds a new client's calls until it knows the client's app) must stay
/// whole: libdbus reuses a freed message's memory for the next one that arrives.
@Suite("Method calls lent to handlers")
struct LentMessageTests {
    @Test("calls a handler keeps read back whole after later calls went through the same wrapper")
    func keptCallsStayWhole() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let server = try Connection(address: bus.address)
        let client = try Connection(address: bus.address)
        let loop = EventLoop()
        server.attach(to: loop)
        client.attach(to: loop)
        let members = ["Keep0", "Drop1", "Drop2", "Keep3", "Drop4", "Drop5", "Keep6", "Drop7"]
        var kept: [Message] = []
        var seen: [String] = []
        server.methodCallHandler = { message in
            let member = message.member ?? "?"
            seen.append(member)
            if member.hasPrefix("Keep") { kept.append(message) }
            if seen.count == members.count { loop.stop() }
        }
        for (i, member) in members.enumerated() {
            let m = try Message.methodCall(
                destination: server.uniqueName, path: "/t", interface: "org.example.T", member: member)
            var w = m.writer()
            w.append("argument \(i)")
            m.setNoReply(true)
            client.send(m)
        }
        let deadline = loop.schedule(afterNanoseconds: 20_000_000_000) { loop.stop() }
        loop.run()
        loop.cancel(deadline)
        #expect(seen == members)
        #expect(kept.map { $0.member ?? "?" } == ["Keep0", "Keep3", "Keep6"])
        for (message, i) in zip(kept, [0, 3, 6]) {
            var r = message.reader()
            #expect(try r.read(String.self) == "argument \(i)")
            #expect(message.sender == client.uniqueName)
        }
    }
}
