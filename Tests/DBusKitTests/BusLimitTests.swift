// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import Testing

/// The bus closes the connection of a sender whose message holds an array over 64 MiB or is
/// 128 MiB long, and a service that loses its connection has stopped serving everyone. So no
/// message that big ever leaves: a method return becomes a `LimitsExceeded` error instead.
@Suite("Messages the bus would punish")
struct BusLimitTests {
    static let mebibyteString = String(repeating: "x", count: 1 << 20)

    func message(arrays: [Int]) throws -> Message {
        let m = try Message.methodCall(
            destination: "org.example.T", path: "/t", interface: "org.example.T", member: "M")
        var w = m.writer()
        for mebibytes in arrays {
            w.appendArray(elementSignature: "(sv)") { a in
                for _ in 0..<mebibytes {
                    a.appendStruct { s in
                        s.append("k")
                        s.appendVariant(signature: "s") { v in v.append(Self.mebibyteString) }
                    }
                }
            }
        }
        return m
    }

    @Test("an array over 64 MiB, or a message near 128 MiB, is seen before it is sent")
    func detects() throws {
        #expect(try message(arrays: [1]).busLimitViolation == nil)
        #expect(try message(arrays: [60, 60]).busLimitViolation == nil)
        let array = try message(arrays: [65]).busLimitViolation
        #expect(array?.contains("an array of") == true, "\(array ?? "nil")")
        let whole = try message(arrays: [60, 60, 10]).busLimitViolation
        #expect(whole?.contains("message limit") == true, "\(whole ?? "nil")")
        // Inside a variant, the array is found too.
        let m = try Message.methodCall(
            destination: "org.example.T", path: "/t", interface: "org.example.T", member: "M")
        var w = m.writer()
        w.appendVariant(signature: "as") { v in
            v.appendArray(elementSignature: "s") { a in for _ in 0..<65 { a.append(Self.mebibyteString) } }
        }
        #expect(m.busLimitViolation?.contains("an array of") == true)
    }

    @Test(
        "an oversized reply reaches its caller as LimitsExceeded, one libdbus will not load as Failed, and the service stays on the bus"
    )
    func replaced() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let server = try Connection(address: bus.address)
        let loop = EventLoop()
        server.attach(to: loop)
        let objects = ObjectServer(connection: server)
        objects.export(
            path: "/t",
            interfaces: [
                DBusInterface(
                    "org.example.T",
                    methods: [
                        DBusMethod("Big", out: [DBusArgument("items", "as")]) { call in
                            call.reply.appendArray(elementSignature: "s") { a in
                                for _ in 0..<65 { a.append(Self.mebibyteString) }
                            }
                        },
                        DBusMethod("Small", out: [DBusArgument("word", "s")]) { call in call.reply.append("fine") },
                        // A dict entry outside an array: the Swift marshaller takes it, libdbus's loader
                        // refuses the body (its own iterator would have aborted the process).
                        DBusMethod("Broken", out: [DBusArgument("entry", "{ss}")]) { call in
                            call.reply.appendDictEntry { e in
                                e.append("k")
                                e.append("v")
                            }
                        },
                    ])
            ])
        let owner = LoopBox(loop)
        let client = Client(
            address: bus.address, server: server.uniqueName, mailbox: loop.mailbox, stop: { owner.loop?.stop() })
        var thread = pthread_t()
        pthread_create(
            &thread, nil,
            { raw in
                Unmanaged<Client>.fromOpaque(raw!).takeRetainedValue().run()
                return nil
            }, Unmanaged.passRetained(client).toOpaque())
        loop.run()
        pthread_join(thread, nil)
        #expect(client.big == "org.freedesktop.DBus.Error.LimitsExceeded", "\(client.bigMessage)")
        #expect(client.bigMessage.contains("over the D-Bus limit"))
        #expect(client.small == "fine", "the service was not disconnected")
        #expect(server.isConnected)
        #expect(server.oversizedMessages == 1)
        #expect(client.broken == "org.freedesktop.DBus.Error.Failed", "\(client.brokenMessage)")
        #expect(client.brokenMessage.contains("could not be marshalled"))
        #expect(server.unmarshallableMessages == 1)
    }
}

private final class LoopBox: @unchecked Sendable {
    weak var loop: EventLoop?
    init(_ loop: EventLoop) { self.loop = loop }
}

private final class Client: @unchecked Sendable {
    let address: String
    let server: String
    let mailbox: EventLoop.Mailbox
    let stop: @Sendable () -> Void
    var big = "", bigMessage = "", small = "", broken = "", brokenMessage = ""

    init(address: String, server: String, mailbox: EventLoop.Mailbox, stop: @escaping @Sendable () -> Void) {
        self.address = address
        self.server = server
        self.mailbox = mailbox
        self.stop = stop
    }

    func run() {
        defer {
            let stop = self.stop
            mailbox.post { stop() }
        }
        guard let connection = try? Connection(address: address) else { return }
        func call(_ member: String) throws(DBusError) -> Message {
            try connection.call(
                Message.methodCall(destination: server, path: "/t", interface: "org.example.T", member: member),
                timeoutMilliseconds: 20_000)
        }
        /// The error's name and message, or "a reply".
        func outcome(_ member: String) -> (String, String) {
            do {
                _ = try call(member)
                return ("a reply", "")
            } catch {
                return (error.name, error.message)
            }
        }
        (big, bigMessage) = outcome("Big")
        (broken, brokenMessage) = outcome("Broken")
        if let reply = try? call("Small"), var r = Optional(reply.reader()) {
            small = (try? r.read(String.self)) ?? ""
        }
    }
}
