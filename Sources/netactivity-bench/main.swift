// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
// A load client for `make bench` (not installed): drives the agent's task API as fast as the bus allows.
//
//   netactivity-bench churn N WINDOW   N tasks begun and completed, WINDOW of them in flight
//   netactivity-bench live N           N live tasks, then GetManagedObjects timings; holds them until stdin closes
//   netactivity-bench cache-core N     in-process cache: add and lookup ops/s with N entries, one 40 % purge,
//                                      next to a sort-on-purge baseline like AFNetworking's
//   netactivity-bench cache-bus SIZE N N lookups of a SIZE-byte image through LookupImage (ay) and OpenImage (fd)
//   netactivity-bench downloads N URL... asks the shared downloader for every URL, N times each, all at once,
//                                      and waits for every DownloadFinished
//   netactivity-bench downloads-open N URL...  the same, and each finished image opened (OpenImageForRequest)
//                                      and read whole, as an app that shows it would
//   netactivity-bench downloads-window W URL...  the same, W requests in flight at a time, the next asked for as
//                                      one finishes (as curl --parallel-max W keeps W transfers going)
//   netactivity-bench downloads-serial URL...  one at a time: the latency of each, request to DownloadFinished
//   netactivity-bench fetch W URL...   FetchImage for every URL, W calls in flight (the next asked for as one is
//                                      answered); each answer's memfd closed unread (curl writes to /dev/null)
//   netactivity-bench prefetch-fg F URL...  PrefetchImages for every URL after the first F, then FetchImage for
//                                      those F (4 calls in flight): the foreground's time, and the prefetch's
//                                      (to its PrefetchFinished)
//   netactivity-bench load CLIENTS SECONDS [SEED]  CLIENTS connections churning counts, leases, tasks and the
//                                      cache, one call at a time each; calls/s and latency percentiles
import LinuxKit
import NetActivityContract
import NetActivityCore
import NetActivityTesting

let name = NetActivityBus.name
let root = NetActivityBus.objectPath

func say(_ s: String) {
    let bytes = Array((s + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

func usage() -> Never {
    say(
        "usage: netactivity-bench churn N WINDOW | live N | cache-core N | cache-bus SIZE N | downloads N URL... | downloads-window W URL... | downloads-serial URL... | load CLIENTS SECONDS [SEED]"
    )
    exit(64)
}

func die(_ e: Any) -> Never {
    say("netactivity-bench: \(e)")
    exit(1)
}

func beginTask(_ description: String) throws -> Message {
    let m = try Message.methodCall(
        destination: name, path: root, interface: name, member: ActivityMember.Method.beginTask.rawValue)
    var w = m.writer()
    w.append(description)
    try w.appendVardict([:])
    return m
}

func complete(_ path: String) throws -> Message {
    let m = try Message.methodCall(
        destination: name, path: path, interface: NetActivityInterface.task.rawValue,
        member: TaskMember.Method.complete.rawValue)
    var w = m.writer()
    w.append("")
    return m
}

let args = CommandLine.arguments
// downloads-serial takes URLs only; every other mode starts with a count.
guard args.count >= 3, let n = Int(args[2]) ?? (args[1] == "downloads-serial" ? 1 : nil), n > 0 else { usage() }
if args[1] == "cache-core" {
    cacheCore(n)
    exit(0)
}
let connection: Connection
do { connection = try Connection() } catch { die(error) }
let loop = EventLoop()
connection.attach(to: loop)

nonisolated func seconds(_ start: UInt64) -> Double { Double(EventLoop.now() - start) / 1e9 }

switch args[1] {
case "churn":
    guard args.count == 4, let window = Int(args[3]), window > 0 else { usage() }
    var started = 0
    var completed = 0
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
                destination: name, path: root, interface: "org.freedesktop.DBus.ObjectManager",
                member: "GetManagedObjects")
            let start = EventLoop.now()
            let reply = try connection.call(m, timeoutMilliseconds: 25_000)
            times.append(seconds(start) * 1000)
            var r = reply.reader()
            if case .dict(_, _, let entries) = try r.readValue() { objects = entries.count }
        } catch { die(error) }
    }
    times.sort()
    let round2 = { (x: Double) in (x * 100).rounded() / 100 }
    print(
        "live=\(n) objects=\(objects) get_managed_objects_p50_ms=\(round2(times[times.count / 2])) max_ms=\(round2(times.last!))"
    )
    fflush(nil)
    // Hold the tasks while the caller measures the agent.
    var byte: UInt8 = 0
    while read(0, &byte, 1) > 0 {}
case "downloads", "downloads-open":
    guard args.count >= 4, let times = Int(args[2]), times > 0 else { usage() }
    downloads(Array(args[3...]), times: times, open: args[1] == "downloads-open")
case "downloads-window":
    guard args.count >= 4, let window = Int(args[2]), window > 0 else { usage() }
    downloads(Array(args[3...]), times: 1, window: window)
case "downloads-serial":
    var latencies: [Double] = []
    for url in args[2...] {
        let start = EventLoop.now()
        downloads([url], times: 1, quiet: true)
        latencies.append(seconds(start) * 1000)
    }
    latencies.sort()
    let r2 = { (x: Double) in (x * 100).rounded() / 100 }
    print(
        "requests=\(latencies.count) p50_ms=\(r2(latencies[latencies.count / 2])) p99_ms=\(r2(latencies[min(latencies.count - 1, latencies.count * 99 / 100)]))"
    )
case "fetch":
    guard args.count >= 4, let window = Int(args[2]), window > 0 else { usage() }
    fetches(Array(args[3...]), window: window)
case "prefetch-fg":
    guard args.count >= 3 + n else { usage() }
    prefetchNextToForeground(foreground: Array(args[3..<(3 + n)]), prefetched: Array(args[(3 + n)...]))
case "load":
    guard args.count >= 4, let duration = Double(args[3]), duration > 0 else { usage() }
    load(clients: n, seconds: duration, seed: args.count > 4 ? UInt64(args[4]) ?? 1 : 1)
case "cache-bus":
    guard args.count == 4, let size = Int(args[2]), let count = Int(args[3]), size >= 64, count > 0 else { usage() }
    cacheBus(size: size, count: count)
default:
    usage()
}

@MainActor func call(_ member: String, interface: String, _ body: (inout MessageWriter) throws -> Void) -> Message {
    do {
        let m = try Message.methodCall(destination: name, path: root, interface: interface, member: member)
        var w = m.writer()
        try body(&w)
        return try connection.call(m, timeoutMilliseconds: 25_000)
    } catch { die(error) }
}

@MainActor func cacheBus(size: Int, count: Int) {
    let cache = NetActivityInterface.imageCache.rawValue
    let image = TestImages.png(width: 64, height: 64, padding: size - TestImages.png(width: 64, height: 64).count)
    _ = call(ImageCacheMember.Method.addImage.rawValue, interface: cache) { w in
        w.append("bench")
        try w.appendBytes(image)
    }
    // The bus daemon's own Ping: the cost of one hop, for scale.
    var start = EventLoop.now()
    for _ in 0..<count {
        do {
            let m = try Message.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus.Peer",
                member: "Ping")
            _ = try connection.call(m, timeoutMilliseconds: 25_000)
        } catch { die(error) }
    }
    let ping = Double(count) / seconds(start)
    start = EventLoop.now()
    var total = 0
    for _ in 0..<count {
        var r = call(ImageCacheMember.Method.lookupImage.rawValue, interface: cache) { w in w.append("bench") }.reader()
        do {
            _ = try r.read(Bool.self)
            total += try r.withBytes { $0.count }
        } catch { die(error) }
    }
    let bytesPath = Double(total) / seconds(start) / 1e6
    start = EventLoop.now()
    total = 0
    var buffer = [UInt8](repeating: 0, count: size)
    for _ in 0..<count {
        var r = call(ImageCacheMember.Method.openImage.rawValue, interface: cache) { w in w.append("bench") }.reader()
        do {
            let fd = try r.readFD()
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            close(fd)
            total += max(0, n)
        } catch { die(error) }
    }
    let fdPath = Double(total) / seconds(start) / 1e6
    let r2 = { (x: Double) in (x * 10).rounded() / 10 }
    print(
        "size=\(size) calls=\(count) ping_per_s=\(Int(ping)) lookup_ay_mb_s=\(r2(bytesPath)) open_fd_mb_s=\(r2(fdPath)) fd_over_ay=\(r2(fdPath / bytesPath))"
    )
}

@MainActor func downloads(_ urls: [String], times: Int, open: Bool = false, quiet: Bool = false, window: Int? = nil) {
    let downloader = NetActivityInterface.downloader.rawValue
    var waiting = 0
    var failed = 0
    var cached = 0
    var started = false
    var buffer: [UInt8] = []
    let all = (0..<times).flatMap { _ in urls }
    var next = 0
    func finish() {
        waiting -= 1
        if window != nil, next < all.count { return request(all[next]) }
        if started, waiting == 0 { loop.stop() }
    }
    /// Opens the image and reads it whole, as an app showing it would; then it counts as done.
    func openAndRead(_ url: String) {
        do {
            let m = try Message.methodCall(
                destination: name, path: root, interface: NetActivityInterface.imageCache.rawValue,
                member: ImageCacheMember.Method.openImageForRequest.rawValue)
            var w = m.writer()
            w.append(url)
            w.append("")
            connection.callAsync(m, timeoutMilliseconds: 60_000) { result in
                guard case .success(let reply) = result else {  // evicted already, say: a failure, not the end
                    failed += 1
                    return finish()
                }
                var r = reply.reader()
                do {
                    let fd = try r.readFD()
                    let size = Int(try r.read(UInt64.self))
                    if buffer.count < size { buffer = [UInt8](repeating: 0, count: size) }
                    let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, size, 0) }
                    close(fd)
                    if n != size { failed += 1 }
                } catch { die(error) }
                finish()
            }
        } catch { die(error) }
    }
    let subscription = connection.onSignal(
        SignalMatch(path: root, interface: downloader, member: DownloaderMember.Signal.downloadFinished.rawValue)
    ) { message in
        var r = message.reader()
        _ = try? r.read(String.self)
        let url = (try? r.read(String.self)) ?? ""
        let ok = (try? r.read(Bool.self)) == true
        if !ok { failed += 1 }
        if ok, open { return openAndRead(url) }
        finish()
    }
    func request(_ url: String) {
        next += 1
        do {
            let m = try Message.methodCall(
                destination: name, path: root, interface: downloader,
                member: DownloaderMember.Method.downloadImage.rawValue)
            var w = m.writer()
            w.append(url)
            try w.appendVardict([:])
            waiting += 1
            connection.callAsync(m, timeoutMilliseconds: 60_000) { result in
                guard case .success(let reply) = result else { die(result) }
                var r = reply.reader()
                _ = try? r.read(String.self)
                _ = try? r.readObjectPath()
                if (try? r.read(Bool.self)) == true {
                    cached += 1
                    finish()
                }
            }
        } catch { die(error) }
    }
    let start = EventLoop.now()
    while next < min(all.count, window ?? all.count) { request(all[next]) }
    started = true
    if waiting > 0 { loop.run() }
    connection.removeSignalHandler(subscription)
    let secs = seconds(start)
    let n = urls.count * times
    if quiet { return }
    print("requests=\(n) seconds=\(secs) per_s=\(Int(Double(n) / secs)) failed=\(failed) cached=\(cached)")
}

/// FetchImage, `window` calls in flight: one call and one reply per image.
@MainActor func fetches(_ urls: [String], window: Int) {
    let start = EventLoop.now()
    fetchAll(urls, window: window) { failed, bytes in
        let secs = seconds(start)
        print(
            "requests=\(urls.count) seconds=\(secs) per_s=\(Int(Double(urls.count) / secs)) failed=\(failed) bytes=\(bytes)"
        )
        loop.stop()
    }
    loop.run()
}

/// FetchImage for every URL, `window` calls in flight (the next asked for as one is answered), each
/// answer's memfd closed unread; `done` once all are answered, with how many failed and the bytes.
@MainActor func fetchAll(_ urls: [String], window: Int, done: @escaping (_ failed: Int, _ bytes: UInt64) -> Void) {
    var next = 0
    var waiting = 0
    var failed = 0
    var bytes: UInt64 = 0
    func request() {
        let url = urls[next]
        next += 1
        waiting += 1
        do {
            let m = try Message.methodCall(
                destination: name, path: root, interface: NetActivityInterface.downloader.rawValue,
                member: DownloaderMember.Method.fetchImage.rawValue)
            var w = m.writer()
            w.append(url)
            try w.appendVardict([:])
            connection.callAsync(m, timeoutMilliseconds: 60_000) { result in
                waiting -= 1
                if case .success(let reply) = result {
                    var r = reply.reader()
                    if let fd = try? r.readFD() {
                        close(fd)
                        bytes += (try? r.read(UInt64.self)) ?? 0
                    }
                } else {
                    failed += 1
                }
                if next < urls.count { return request() }
                if waiting == 0 { done(failed, bytes) }
            }
        } catch { die(error) }
    }
    guard !urls.isEmpty else { return done(0, 0) }
    while next < min(urls.count, window) { request() }
}

/// Prefetch of `prefetched` and, once the agent has it, FetchImage of `foreground` (4 in flight):
/// how long the foreground took, and the prefetch (to its PrefetchFinished).
@MainActor func prefetchNextToForeground(foreground: [String], prefetched: [String]) {
    let start = EventLoop.now()
    var fgSeconds: Double?
    var prefetchSeconds: Double?
    var stored = 0
    var failed = 0
    func stopWhenDone() { if fgSeconds != nil, prefetchSeconds != nil { loop.stop() } }
    let downloader = NetActivityInterface.downloader.rawValue
    connection.onSignal(
        SignalMatch(path: root, interface: downloader, member: DownloaderMember.Signal.prefetchFinished.rawValue)
    ) { m in
        var r = m.reader()
        _ = try? r.read(String.self)
        stored = Int((try? r.read(UInt32.self)) ?? 0)
        prefetchSeconds = seconds(start)
        stopWhenDone()
    }
    do {
        let m = try Message.methodCall(
            destination: name, path: root, interface: downloader,
            member: DownloaderMember.Method.prefetchImages.rawValue)
        var w = m.writer()
        w.appendArray(elementSignature: "s") { a in for url in prefetched { a.append(url) } }
        try w.appendVardict([:])
        connection.callAsync(m, timeoutMilliseconds: 60_000) { result in
            guard case .success = result else { die("PrefetchImages failed: \(result)") }
            let fgStart = EventLoop.now()
            fetchAll(foreground, window: 4) { fgFailed, _ in
                failed = fgFailed
                fgSeconds = seconds(fgStart)
                stopWhenDone()
            }
        }
    } catch { die(error) }
    loop.run()
    print(
        "foreground=\(foreground.count) fg_seconds=\(fgSeconds ?? 0) prefetched=\(prefetched.count) stored=\(stored) prefetch_seconds=\(prefetchSeconds ?? 0) failed=\(failed)"
    )
}

/// A sort-on-purge cache like AFAutoPurgingImageCache: one record object per image with a
/// wall-clock access date (AFCachedImage with its NSDate), a dictionary of them, and on purge a copy
/// of all records sorted by date, removed oldest first until under the preferred usage.
final class AccessRecord {
    let identifier: String
    let cost: UInt64
    var lastAccessDate: Double
    init(identifier: String, cost: UInt64, date: Double) {
        self.identifier = identifier
        self.cost = cost
        lastAccessDate = date
    }
}

struct SortingCache {
    var records: [String: AccessRecord] = [:]
    var usage: UInt64 = 0
    let capacity: UInt64, preferred: UInt64

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    mutating func add(_ key: String, cost: UInt64) {
        if let old = records[key] { usage -= old.cost }
        records[key] = AccessRecord(identifier: key, cost: cost, date: Self.now())
        usage += cost
        guard usage > capacity else { return }
        let sorted = Array(records.values).sorted { $0.lastAccessDate < $1.lastAccessDate }
        for record in sorted where usage > preferred {
            records[record.identifier] = nil
            usage -= record.cost
        }
    }
}

func cacheCore(_ n: Int) {
    let keys = (0..<n).map { getenv("SHORT_KEYS") != nil ? "k\($0)" : "https://example.com/images/\($0).png" }
    let cost: UInt64 = 1024
    var cache = AutoPurgingImageCache<Int>(
        memoryCapacity: UInt64(n) * cost, preferredMemoryUsageAfterPurge: UInt64(n) * cost * 6 / 10)
    var start = EventLoop.now()
    for (i, key) in keys.enumerated() { _ = try? cache.add(i, cost: cost, for: key) }
    let addRate = Double(n) / seconds(start)
    var rng: UInt64 = 0x2545F4914F6CDD1D
    var found = 0
    start = EventLoop.now()
    for _ in 0..<n {
        rng ^= rng << 13
        rng ^= rng >> 7
        rng ^= rng << 17
        if cache.image(for: keys[Int(rng % UInt64(n))]) != nil { found += 1 }
    }
    let lookupRate = Double(n) / seconds(start)
    // One purge: the cache is full; one more entry takes it over the capacity, and 40 % must go.
    start = EventLoop.now()
    _ = try? cache.add(-1, cost: cost, for: "one more")
    // The cache evicts 4,096 entries per call and the agent goes on on later turns: all of them.
    while cache.purgePending { _ = cache.continuePurge() }
    let purge = seconds(start)
    let evicted = n + 1 - cache.count

    var baseline = SortingCache(capacity: UInt64(n) * cost, preferred: UInt64(n) * cost * 6 / 10)
    for key in keys { baseline.add(key, cost: cost) }
    start = EventLoop.now()
    baseline.add("one more", cost: cost)
    let basePurge = seconds(start)
    let r2 = { (x: Double) in (x * 100).rounded() / 100 }
    print(
        "entries=\(n) add_per_s=\(Int(addRate)) lookup_per_s=\(Int(lookupRate)) found=\(found) purge_evicted=\(evicted) purge_ms=\(r2(purge * 1000)) sort_purge_ms=\(r2(basePurge * 1000)) speedup=\(r2(basePurge / purge))"
    )
}
