// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import NetActivityTesting
import Testing

/// Drives the pool as the agent's runner would, on a manual clock, with no process at all: each row
/// is an event at a time, and the actions it led to are recorded as short strings.
final class PoolHarness {
    let clock = ManualClock()
    var pool: DecoderPool
    /// Jobs by the name a row gave them.
    var jobs: [String: DecoderPool.JobID] = [:]
    var log: [String] = []

    init(
        maxDecoders: Int = 2, timeout: Duration = .seconds(10), idle: Duration = .seconds(30), bubblewrap: Bool = false
    ) {
        pool = DecoderPool(
            configuration: .init(maxDecoders: maxDecoders, timeout: timeout, idleTimeout: idle), bubblewrap: bubblewrap)
    }

    func name(_ job: DecoderPool.JobID) -> String { jobs.first { $0.value == job }?.key ?? "?\(job)" }

    func record(_ actions: [DecoderPool.Action]) {
        for action in actions {
            switch action {
            case .spawn(let p, let kind, let wrapped):
                log.append("spawn \(p)\(kind == .svg ? " for SVG" : "")\(wrapped ? " in bwrap" : "")")
            case .send(let job, let p): log.append("send \(name(job)) to \(p)")
            case .stop(let p, let kill): log.append(kill ? "kill \(p)" : "let go \(p)")
            case .fail(let job, let why): log.append("fail \(name(job)): \(why)")
            case .gaveUpBubblewrap: log.append("no bwrap")
            }
        }
    }

    enum Event {
        case submit(String, owner: String)
        case submitSVG(String, owner: String)
        case ready(DecoderPool.ProcessID)
        case answered(DecoderPool.ProcessID)
        case ended(DecoderPool.ProcessID)
        case misbehaved(DecoderPool.ProcessID)
        case spawnFailed(DecoderPool.ProcessID)
        case cancel(String)
        case reaped(DecoderPool.ProcessID)
    }

    /// Runs `(seconds, event)` rows in order; the pool's deadline timer fires on the way, as the
    /// runner's one timer would.
    func run(_ rows: [(Double, Event)]) {
        for (t, event) in rows {
            advance(to: t)
            let now = clock.now
            switch event {
            case .submit(let job, let owner), .submitSVG(let job, let owner):
                let kind: DecoderPool.Kind = if case .submitSVG = event { .svg } else { .images }
                let (id, actions) = pool.submit(owner: owner, kind: kind, now: now)
                jobs[job] = id
                record(actions)
            case .ready(let p): record(pool.ready(p, now: now))
            case .answered(let p): record(pool.answered(p, now: now))
            case .ended(let p): record(pool.ended(p, why: "it died", now: now))
            case .misbehaved(let p): record(pool.misbehaved(p, why: "it lied", now: now))
            case .spawnFailed(let p): record(pool.spawnFailed(p, why: "no decoder", now: now))
            case .cancel(let job): log.append("cancel \(job): \(pool.cancel(jobs[job]!) ? "was waiting" : "runs on")")
            case .reaped(let p): pool.reaped(p)
            }
        }
    }

    /// Moves the clock to `seconds`, letting the pool's deadlines pass on the way.
    func advance(to seconds: Double) {
        let target = Instant.zero + .seconds(double: seconds)
        while let deadline = pool.nextDeadline, deadline <= target {
            clock.advance(to: max(clock.now, deadline))
            log.append("at \(Double(clock.now.nanoseconds) / 1e9):")
            record(pool.timePassed(now: clock.now))
        }
        clock.advance(to: max(clock.now, target))
    }
}

@Suite("Decoder pool: the decoders' decisions, on a manual clock")
struct DecoderPoolTests {
    @Test("a request starts a decoder and is sent at once; the decoder serves the next when it answers")
    func firstRequest() {
        let h = PoolHarness(maxDecoders: 1)
        h.run([
            (0, .submit("a", owner: "app:x")), (0.01, .ready(1)), (0.02, .submit("b", owner: "app:x")),
            (0.1, .answered(1)), (0.2, .answered(1)),
        ])
        #expect(h.log == ["spawn 1", "send a to 1", "send b to 1"])
        #expect(h.pool.process(1)?.state == .idle(since: .zero + .milliseconds(200)))
        #expect(h.pool.started == 1 && h.pool.replaced == 0)
    }

    @Test("up to maxDecoders run at once; the rest waits, and goes to whichever is free first")
    func maxDecoders() {
        let h = PoolHarness(maxDecoders: 2)
        h.run([
            (0, .submit("a", owner: "app:x")), (0, .submit("b", owner: "app:y")), (0, .submit("c", owner: "app:z")),
            (0.01, .ready(1)), (0.01, .ready(2)), (0.5, .answered(2)),
        ])
        #expect(h.log == ["spawn 1", "send a to 1", "spawn 2", "send b to 2", "send c to 2"])
        #expect(h.pool.processCount == 2 && h.pool.waitingCount == 0)
    }

    @Test("a request not answered within the timeout fails; its decoder is killed, the next request gets a new one")
    func timeout() {
        let h = PoolHarness(maxDecoders: 1, timeout: .seconds(10))
        h.run([
            (0, .submit("a", owner: "app:x")), (0.01, .ready(1)), (5, .submit("b", owner: "app:x")), (11, .reaped(1)),
        ])
        #expect(
            h.log == [
                "spawn 1", "send a to 1", "at 10.0:", "kill 1",
                "fail a: the image decoder took longer than 10.0 seconds",
                "spawn 2", "send b to 2",
            ])
        #expect(h.pool.replaced == 1)
        #expect(h.pool.process(1) == nil, "reaped and forgotten")
        #expect(h.pool.nextDeadline == .zero + .seconds(20), "b's own deadline, from when it was sent")
    }

    @Test("a decoder idle for idleTimeout is let go (its socket closed, not killed); work after it starts another")
    func idle() {
        let h = PoolHarness(maxDecoders: 1, idle: .seconds(30))
        h.run([
            (0, .submit("a", owner: "app:x")), (0.01, .ready(1)), (1, .answered(1)),
            (30.9, .submit("b", owner: "app:x")),
            (31, .answered(1)), (62, .reaped(1)), (70, .submit("c", owner: "app:x")),
        ])
        #expect(h.log == ["spawn 1", "send a to 1", "send b to 1", "at 61.0:", "let go 1", "spawn 2", "send c to 2"])
        #expect(h.pool.nextDeadline == .zero + .seconds(80))
    }

    @Test("a decoder that dies or lies fails its own request alone; what waits goes to a new one")
    func deathAndLies() {
        let h = PoolHarness(maxDecoders: 1)
        h.run([
            (0, .submit("a", owner: "app:x")), (0, .submit("b", owner: "app:x")), (0.01, .ready(1)),
            (0.1, .ended(1)), (0.2, .ready(2)), (0.3, .misbehaved(2)),
        ])
        #expect(
            h.log == [
                "spawn 1", "send a to 1", "kill 1", "fail a: it died", "spawn 2", "send b to 2", "kill 2",
                "fail b: it lied",
            ])
        #expect(h.pool.replaced == 2)
    }

    @Test("bubblewrap that ends a decoder before it is ready is given up once; the request waits again, first")
    func bubblewrapGivenUp() {
        let h = PoolHarness(maxDecoders: 1, bubblewrap: true)
        h.run([
            (0, .submit("a", owner: "app:x")), (0, .submit("b", owner: "app:y")), (0.01, .ended(1)),
            (0.02, .ready(2)), (0.1, .answered(2)), (0.2, .ended(2)),
        ])
        #expect(
            h.log == [
                "spawn 1 in bwrap", "send a to 1", "no bwrap", "kill 1", "spawn 2", "send a to 2", "send b to 2",
                "kill 2", "fail b: it died",
            ])
        #expect(!h.pool.usesBubblewrap)
        #expect(h.pool.bubblewrapFailure == "bubblewrap did not start the decoder: it died")
    }

    @Test("a decoder ready in bubblewrap keeps it: a later death is the image's, not bwrap's")
    func bubblewrapKept() {
        let h = PoolHarness(maxDecoders: 1, bubblewrap: true)
        h.run([
            (0, .submit("a", owner: "app:x")), (0.01, .ready(1)), (0.1, .ended(1)), (0.2, .submit("b", owner: "app:x")),
        ])
        #expect(
            h.log == [
                "spawn 1 in bwrap", "send a to 1", "kill 1", "fail a: it died", "spawn 2 in bwrap", "send b to 2",
            ])
        #expect(h.pool.usesBubblewrap)
    }

    @Test("a decoder that cannot start fails its request and every one waiting; the next request tries again")
    func spawnFailure() {
        let h = PoolHarness(maxDecoders: 1)
        h.run([
            (0, .submit("a", owner: "app:x")), (0, .submit("b", owner: "app:y")), (0, .spawnFailed(1)),
            (1, .submit("c", owner: "app:x")),
        ])
        #expect(
            h.log == ["spawn 1", "send a to 1", "fail a: no decoder", "fail b: no decoder", "spawn 2", "send c to 2"])
        #expect(h.pool.lastStartError == "no decoder")
        #expect(h.pool.waitingCount == 0)
    }

    @Test("the next image is the app's running fewest, then the one served least recently: one app never holds another")
    func fairOrder() {
        let h = PoolHarness(maxDecoders: 1)
        var rows: [(Double, PoolHarness.Event)] = [(0, .submit("a1", owner: "flatpak:a")), (0.01, .ready(1))]
        for i in 2...4 { rows.append((0.02, .submit("a\(i)", owner: "flatpak:a"))) }
        rows += [
            (0.03, .submit("b1", owner: "app:b")), (0.03, .submit("b2", owner: "app:b")),
            (0.04, .submit("c1", owner: "app:c")),
        ]
        for t in 1...7 { rows.append((Double(t), .answered(1))) }
        h.run(rows)
        #expect(
            h.log.filter { $0.hasPrefix("send") } == [
                "send a1 to 1", "send b1 to 1", "send c1 to 1", "send a2 to 1", "send b2 to 1", "send a3 to 1",
                "send a4 to 1",
            ])
    }

    @Test("the unscoped pool's processes are one app: its forked processes take turns with the apps, not before them")
    func unscopedProcessesAreOneApp() {
        let h = PoolHarness(maxDecoders: 1)
        h.run([
            (0, .submit("p1", owner: "unscoped/pid:1")), (0.01, .ready(1)),
            (0.02, .submit("p2", owner: "unscoped/pid:2")), (0.02, .submit("p3", owner: "unscoped/pid:3")),
            (0.03, .submit("n", owner: "app:newcomer")), (1, .answered(1)), (2, .answered(1)),
        ])
        #expect(h.log.filter { $0.hasPrefix("send") } == ["send p1 to 1", "send n to 1", "send p2 to 1"])
    }

    @Test("a cancelled request that waits leaves the queue; one already sent runs on")
    func cancel() {
        let h = PoolHarness(maxDecoders: 1)
        h.run([
            (0, .submit("a", owner: "app:x")), (0, .submit("b", owner: "app:x")), (0, .submit("c", owner: "app:x")),
            (0.01, .cancel("b")), (0.01, .cancel("a")), (0.02, .ready(1)), (0.1, .answered(1)),
        ])
        #expect(
            h.log == ["spawn 1", "send a to 1", "cancel b: was waiting", "cancel a: runs on", "send c to 1"])
        #expect(h.pool.waitingCount == 0)
    }

    @Test("an SVG goes to a decoder of its own kind; raster images never wait for it, nor it for them")
    func kinds() {
        let h = PoolHarness(maxDecoders: 2)
        h.run([
            (0, .submit("a", owner: "app:x")), (0.01, .ready(1)), (0.1, .answered(1)),
            (0.2, .submitSVG("s", owner: "app:x")), (0.21, .ready(2)), (0.3, .submit("b", owner: "app:y")),
            (0.4, .answered(2)), (0.5, .answered(1)),
        ])
        #expect(h.log == ["spawn 1", "send a to 1", "spawn 2 for SVG", "send s to 2", "send b to 1"])
        #expect(h.pool.process(2)?.kind == .svg && h.pool.process(1)?.kind == .images)
    }

    @Test("with the pool full, an SVG lets an idle raster decoder go for a decoder of its own; a busy one it waits for")
    func kindsMakeRoom() {
        let h = PoolHarness(maxDecoders: 1)
        h.run([
            (0, .submit("a", owner: "app:x")), (0.01, .ready(1)), (0.02, .submitSVG("s", owner: "app:y")),
            (0.03, .submit("b", owner: "app:x")), (0.1, .answered(1)),
        ])
        // a runs; s waits (the one decoder is busy); a's answer frees it: b is raster (the decoder's own
        // kind) but s is served first (app:y has run nothing), so decoder 1 goes idle... and is let go.
        #expect(h.log == ["spawn 1", "send a to 1", "let go 1", "spawn 2 for SVG", "send s to 2"])
        h.run([(0.2, .ready(2)), (0.3, .answered(2))])
        #expect(h.log.suffix(3) == ["let go 2", "spawn 3", "send b to 3"])
    }

    @Test("events about a decoder that is gone change nothing")
    func staleEvents() {
        let h = PoolHarness(maxDecoders: 1)
        h.run([
            (0, .submit("a", owner: "app:x")), (0.1, .misbehaved(1)), (0.2, .ended(1)), (0.3, .answered(1)),
            (0.4, .ready(1)), (0.5, .ended(7)),
        ])
        #expect(h.log == ["spawn 1", "send a to 1", "kill 1", "fail a: it lied"])
        #expect(h.pool.processCount == 0 && h.pool.replaced == 1)
        #expect(h.pool.nextDeadline == nil, "nothing left to time")
    }
}
