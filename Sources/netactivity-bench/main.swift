// A load client for `make bench` (not installed): drives the agent's task API as fast as the bus allows.
//
//   netactivity-bench churn N WINDOW   N tasks begun and completed, WINDOW of them in flight
//   netactivity-bench live N           N live tasks, then GetManagedObjects timings; holds them until stdin closes
import DBusKit
import Glibc

let name = "org.example.NetActivity", root = "/org/example/NetActivity"

func say(_ s: String) {
    let bytes = Array((s + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

func usage() -> Never {
    say("usage: netactivity-bench churn N WINDOW | live N")
    exit(64)
}

func die(_ e: Any) -> Never {
    say("netactivity-bench: \(e)")
    exit(1)
}

func beginTask(_ description: String) throws -> Message {
    let m = try Message.methodCall(destination: name, path: root, interface: name, member: "BeginTask")
    var w = m.writer()
    w.append(description)
    try w.appendVardict([:])
    return m
}

func complete(_ path: String) throws -> Message {
    let m = try Message.methodCall(destination: name, path: path, interface: name + ".Task", member: "Complete")
    var w = m.writer()
    w.append("")
    return m
}

let args = CommandLine.arguments
guard args.count >= 3, let n = Int(args[2]), n > 0 else { usage() }
let connection: Connection
do { connection = try Connection() } catch { die(error) }
let loop = EventLoop()
connection.attach(to: loop)

func seconds(_ start: UInt64) -> Double { Double(EventLoop.now() - start) / 1e9 }

switch args[1] {
case "churn":
    guard args.count == 4, let window = Int(args[3]), window > 0 else { usage() }
    var started = 0, completed = 0
    func startOne() {
        started += 1
        do {
            connection.callAsync(try beginTask("bench")) { result in
                guard case .success(let reply) = result else { die(result) }
                var r = reply.reader()
                do {
                    connection.callAsync(try complete(try r.readObjectPath())) { result in
                        guard case .success = result else { die(result) }
                        completed += 1
                        if started < n { startOne() }
                        if completed == n { loop.stop() }
                    }
                } catch { die(error) }
            }
        } catch { die(error) }
    }
    let start = EventLoop.now()
    for _ in 0..<min(window, n) { startOne() }
    loop.run()
    print("tasks=\(n) seconds=\(seconds(start)) tasks_per_s=\(Int(Double(n) / seconds(start)))")
case "live":
    var begun = 0
    for _ in 0..<n {
        do {
            connection.callAsync(try beginTask("live bench task")) { result in
                guard case .success = result else { die(result) }
                begun += 1
                if begun == n { loop.stop() }
            }
        } catch { die(error) }
    }
    loop.run()
    var times: [Double] = []
    var objects = 0
    for _ in 0..<21 {
        do {
            let m = try Message.methodCall(
                destination: name, path: root, interface: "org.freedesktop.DBus.ObjectManager", member: "GetManagedObjects")
            let start = EventLoop.now()
            let reply = try connection.call(m, timeoutMilliseconds: 25_000)
            times.append(seconds(start) * 1000)
            var r = reply.reader()
            if case .dict(_, _, let entries) = try r.readValue() { objects = entries.count }
        } catch { die(error) }
    }
    times.sort()
    let round2 = { (x: Double) in (x * 100).rounded() / 100 }
    print("live=\(n) objects=\(objects) get_managed_objects_p50_ms=\(round2(times[times.count / 2])) max_ms=\(round2(times.last!))")
    fflush(nil)
    // Hold the tasks while the caller measures the agent.
    var byte: UInt8 = 0
    while read(0, &byte, 1) > 0 {}
default:
    usage()
}
