// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityTesting

/// `load CLIENTS SECONDS [SEED]`: CLIENTS connections on one event loop, each a closed loop of
/// one call at a time, for SECONDS: increments and decrements, leases begun and ended, tasks
/// begun and completed, cache adds and lookups, chosen at random (seeded). Then every client
/// gives back what it holds and disconnects. Prints calls/s and latency percentiles; exits 1 if
/// any call failed (no answer, or the connection lost). A D-Bus error from the agent is a refusal,
/// counted apart: another client may have set MemoryCapacity below the load's images, say.
@MainActor func load(clients: Int, seconds: Double, seed: UInt64) {
    let image = TestImages.png(width: 16, height: 16, padding: 1000)
    let deadline = EventLoop.now() + UInt64(seconds * 1e9)
    var latencies: [UInt64] = []
    latencies.reserveCapacity(1 << 20)
    var failures = 0
    var refusals = 0
    var finished = 0
    let transportErrors: Set<String> = Set(
        [NetActivityError.Name.noReply, .disconnected, .busTimeout, .serviceUnknown, .nameHasNoOwner].map(\.rawValue))
    var rng = seed | 1

    func random(_ n: Int) -> Int {
        rng ^= rng << 13
        rng ^= rng >> 7
        rng ^= rng << 17
        return Int(rng % UInt64(n))
    }

    final class Client {
        let connection: Connection
        let index: Int
        var count = 0
        var leases: [Int32] = []
        var task: String?
        var step = 0
        init(_ connection: Connection, _ index: Int) {
            self.connection = connection
            self.index = index
        }
    }

    func message(
        _ member: String, path: String = root, interface: String = name,
        _ body: (inout MessageWriter) throws -> Void = { _ in }
    ) -> Message {
        do {
            let m = try Message.methodCall(destination: name, path: path, interface: interface, member: member)
            var w = m.writer()
            try body(&w)
            return m
        } catch { die(error) }
    }

    /// Sends one call and, on its answer, records the latency and goes on with `next`.
    func send(_ c: Client, _ m: Message, _ then: @escaping (Message) -> Void) {
        let start = EventLoop.now()
        c.connection.callAsync(m, timeoutMilliseconds: 30_000) { result in
            latencies.append(EventLoop.now() - start)
            switch result {
            case .success(let reply): then(reply)
            case .failure(let e) where transportErrors.contains(e.name):
                failures += 1
                if failures <= 5 { say("load: \(m.member ?? "?") failed: \(e)") }
                next(c)
            case .failure:
                refusals += 1
                next(c)
            }
        }
    }

    func next(_ c: Client) {
        if let task = c.task {
            c.task = nil
            return send(
                c,
                message(TaskMember.Method.complete.rawValue, path: task, interface: NetActivityInterface.task.rawValue)
                { w in w.append("") }
            ) { _ in next(c) }
        }
        guard EventLoop.now() < deadline else { return giveBack(c) }
        c.step += 1
        let cache = NetActivityInterface.imageCache.rawValue
        let key = "load-\(c.index)-\(c.step % 16)"
        switch random(6) {
        case 0 where c.count < 4:
            c.count += 1
            send(c, message(ActivityMember.Method.incrementActivityCount.rawValue)) { _ in next(c) }
        case 0:
            c.count -= 1
            send(c, message(ActivityMember.Method.decrementActivityCount.rawValue)) { _ in next(c) }
        case 1 where c.leases.count < 3:
            send(c, message(ActivityMember.Method.beginActivity.rawValue) { w in w.append("load") }) { reply in
                var r = reply.reader()
                if let fd = try? r.readFD() { c.leases.append(fd) }
                next(c)
            }
        case 1:
            close(c.leases.removeFirst())
            next(c)
        case 2:
            send(
                c,
                message(ActivityMember.Method.beginTask.rawValue) { w in
                    w.append("load task")
                    try w.appendVardict([:])
                }
            ) { reply in
                var r = reply.reader()
                c.task = try? r.readObjectPath()
                next(c)
            }
        case 3:
            send(
                c,
                message(ImageCacheMember.Method.addImage.rawValue, interface: cache) { w in
                    w.append(key)
                    try w.appendBytes(image)
                }
            ) { _ in next(c) }
        default:
            send(c, message(ImageCacheMember.Method.lookupImage.rawValue, interface: cache) { w in w.append(key) }) {
                _ in next(c)
            }
        }
    }

    /// Time is up: decrement what was incremented, close the leases, and leave.
    func giveBack(_ c: Client) {
        for fd in c.leases { close(fd) }
        c.leases = []
        guard c.count == 0 else {
            c.count -= 1
            return send(c, message(ActivityMember.Method.decrementActivityCount.rawValue)) { _ in giveBack(c) }
        }
        finished += 1
        if finished == clients { loop.stop() }
    }

    var all: [Client] = []
    for i in 0..<clients {
        do {
            let c = try Connection()
            c.attach(to: loop)
            all.append(Client(c, i))
        } catch { die(error) }
    }
    let start = EventLoop.now()
    for c in all { next(c) }
    loop.run()
    let elapsed = Double(EventLoop.now() - start) / 1e9
    for c in all { c.connection.close() }
    latencies.sort()
    func ms(_ q: Double) -> Double {
        guard !latencies.isEmpty else { return 0 }
        let v = Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * q))]) / 1e6
        return (v * 100).rounded() / 100
    }
    print(
        "clients=\(clients) seconds=\((elapsed * 10).rounded() / 10) calls=\(latencies.count) "
            + "calls_per_s=\(Int(Double(latencies.count) / elapsed)) p50_ms=\(ms(0.5)) p99_ms=\(ms(0.99)) "
            + "max_ms=\(ms(1.0)) failures=\(failures) refusals=\(refusals)")
    fflush(nil)
    exit(failures == 0 ? 0 : 1)
}
