// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityTesting
import Testing

@testable import NetActivityAgent

/// The agent's side of the image decoder: `DecoderRunner` with real `netactivity-decoder` processes
/// (built beside the tests), their sockets on an event loop of its own and their timers on a manual
/// scheduler: what it answers, and what it does with a decoder that dies, stops, or has nothing to
/// do. (The pool's decisions alone are `DecoderPoolTests`' tables.)
@Suite("Decoder runner", .serialized, .timeLimit(.minutes(1)))
struct DecoderRunnerTests {
    /// The decoder built beside this test binary.
    static let decoder: String? = {
        guard let exe = ServiceProcess.executablePath else { return nil }
        var dir = exe
        while let slash = dir.lastIndex(of: "/"), !dir.hasSuffix("/debug"), !dir.hasSuffix("/release") {
            dir = String(dir[..<slash])
            if dir.isEmpty { return nil }
        }
        let path = dir + "/netactivity-decoder"
        return access(path, X_OK) == 0 ? path : nil
    }()

    let loop = EventLoop()
    let scheduler = ManualScheduler()

    func runner(
        _ path: String, bubblewrap: String? = nil, maxDecoders: Int = 2, timeout: Duration = .seconds(10),
        idleTimeout: Duration = .seconds(30), limits: DecodeLimits = .init(), accounts: AgentAccounts = AgentAccounts()
    ) -> DecoderRunner {
        DecoderRunner(
            sandbox: DecoderSandbox(executable: path, bubblewrap: bubblewrap), loop: loop, scheduler: scheduler,
            configuration: .init(maxDecoders: maxDecoders, timeout: timeout, idleTimeout: idleTimeout),
            limits: limits, accounts: accounts)
    }

    func image(_ bytes: [UInt8]) -> Int32 {
        let fd = bytes.withUnsafeBytes { SealedMemory.make(name: "test-image", bytes: $0) }
        return fd ?? -1
    }

    /// Runs the loop, and the scheduler's turns due now (its time stands still), until `done` says
    /// so (or 20 s).
    func run(until done: () -> Bool) {
        let deadline = EventLoop.now() + 20_000_000_000
        scheduler.advance(by: .zero)
        while !done(), EventLoop.now() < deadline {
            loop.runOnce(maxWaitNanoseconds: 50_000_000)
            scheduler.advance(by: .zero)
        }
    }

    func decode(
        _ pool: DecoderRunner, _ bytes: [UInt8], box: PixelBox = .unbounded
    ) -> Result<DecodedPixels, DecodeFailure> {
        var result: Result<DecodedPixels, DecodeFailure>?
        _ = pool.decode(image: image(bytes), ask: PixelAsk(box: box)) { result = $0 }
        run { result != nil }
        return result!
    }

    func bytes(_ pixels: DecodedPixels) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: pixels.byteCount)
        _ = out.withUnsafeMutableBytes { pread(pixels.fd, $0.baseAddress, $0.count, 0) }
        return out
    }

    func alive(_ pid: Int32) -> Bool { kill(pid, 0) == 0 }

    @Test("an image comes back as sealed premultiplied BGRA in its box; errors come back as what they are")
    func decodes() throws {
        let path = try #require(Self.decoder, "netactivity-decoder is built beside the tests")
        let pool = runner(path, bubblewrap: DecoderSandbox.installedBubblewrap())
        let pixels = try decode(
            pool, TestImages.decodablePNG(width: 40, height: 20, rgba: (255, 0, 0, 255)), box: .init(maxWidth: 10)
        ).get()
        #expect((pixels.width, pixels.height, pixels.stride) == (10, 5, 40))
        #expect((pixels.originalWidth, pixels.originalHeight) == (40, 20))
        #expect(SealedMemory.isSealedReadOnly(pixels.fd))
        #expect(bytes(pixels).count == 200)
        guard case .failure(.notAnImage) = decode(pool, Array("plain text".utf8)) else {
            Issue.record("text is not an image")
            return
        }
        guard
            case .failure(.tooLarge) = decode(
                runner(path, limits: DecodeLimits(maxPixels: 100)),
                TestImages.decodablePNG(width: 40, height: 40, rgba: (255, 0, 0, 255)))
        else {
            Issue.record("over the pixel limit")
            return
        }
        #expect(pool.processCount == 1, "one decoder served them all, one after another")
    }

    @Test("inside bubblewrap where it works; where bwrap fails, the same request is decoded without it")
    func bubblewrap() throws {
        let path = try #require(Self.decoder)
        let png = TestImages.decodablePNG(width: 4, height: 2, rgba: (0, 0, 255, 255))
        if let bwrap = DecoderSandbox.installedBubblewrap() {
            let wrapped = runner(path, bubblewrap: bwrap)
            #expect(try decode(wrapped, png).get().width == 4)
            #expect(wrapped.usesBubblewrap && wrapped.bubblewrapFailure == nil, "it worked: it stays")
        }
        // A bwrap that cannot start anything (as where user namespaces are off): it exits at once.
        let broken = runner(path, bubblewrap: "/bin/false")
        var warned: [String] = []
        broken.warn = { warned.append($0) }
        #expect(try decode(broken, png).get().width == 4, "the request waited for a decoder without it")
        #expect(!broken.usesBubblewrap)
        #expect(
            warned.count == 1 && warned[0].contains("bubblewrap did not start") && warned[0].contains("/bin/false"),
            "\(warned)")
        #expect(try decode(broken, png).get().width == 4)
        #expect(warned.count == 1, "given up once")
    }

    @Test("a decoder killed mid-request fails that request alone; the next one gets a new decoder")
    func killed() throws {
        let path = try #require(Self.decoder)
        let pool = runner(path)
        _ = try decode(pool, TestImages.decodablePNG(width: 4, height: 4, rgba: (255, 0, 0, 255))).get()
        let first = try #require(pool.pids.first)
        kill(first, SIGSTOP)  // it cannot answer before it is killed
        var result: Result<DecodedPixels, DecodeFailure>?
        _ = pool.decode(
            image: image(TestImages.decodablePNG(width: 4, height: 4, rgba: (255, 0, 0, 255))), ask: PixelAsk()
        ) { result = $0 }
        kill(first, SIGKILL)
        run { result != nil }
        guard case .failure(.failed(let why)) = result else {
            Issue.record("the killed decoder's request fails: \(String(describing: result))")
            return
        }
        #expect(why.contains("signal 9") || why.contains("closed its socket"), "\(why)")
        let next = try decode(pool, TestImages.decodablePNG(width: 3, height: 3, rgba: (255, 0, 0, 255))).get()
        #expect(next.width == 3)
        #expect(pool.pids != [first])
        run { !alive(first) }
        #expect(!alive(first), "the killed decoder was reaped")
    }

    @Test("a decoder that stops answering is killed at its deadline, on the scheduler's clock")
    func stopped() throws {
        let path = try #require(Self.decoder)
        let pool = runner(path, timeout: .seconds(10))
        _ = try decode(pool, TestImages.decodablePNG(width: 2, height: 2, rgba: (255, 0, 0, 255))).get()
        let stuck = try #require(pool.pids.first)
        kill(stuck, SIGSTOP)
        var result: Result<DecodedPixels, DecodeFailure>?
        _ = pool.decode(
            image: image(TestImages.decodablePNG(width: 2, height: 2, rgba: (255, 0, 0, 255))), ask: PixelAsk()
        ) { result = $0 }
        scheduler.advance(by: .milliseconds(9999))
        loop.runOnce(maxWaitNanoseconds: 0)
        #expect(result == nil && alive(stuck), "not before its deadline")
        scheduler.advance(by: .milliseconds(1))
        run { result != nil }
        guard case .failure(.failed(let why)) = result else {
            Issue.record("the stopped decoder's request fails")
            return
        }
        #expect(why.contains("took longer"), "\(why)")
        run { !alive(stuck) }
        #expect(!alive(stuck), "killed and reaped")
        #expect(try decode(pool, TestImages.decodablePNG(width: 2, height: 2, rgba: (255, 0, 0, 255))).get().width == 2)
    }

    @Test("up to two decoders run at once; with nothing to do they leave")
    func poolAndIdle() throws {
        let path = try #require(Self.decoder)
        let pool = runner(path, maxDecoders: 2, idleTimeout: .seconds(30))
        var results: [Result<DecodedPixels, DecodeFailure>] = []
        for size in 1...5 {
            _ = pool.decode(
                image: image(TestImages.decodablePNG(width: UInt32(size), height: 1, rgba: (255, 0, 0, 255))),
                ask: PixelAsk()
            ) { results.append($0) }
        }
        #expect(pool.processCount == 2)
        run { results.count == 5 }
        #expect(Set(results.compactMap { try? $0.get().width }) == [1, 2, 3, 4, 5])
        let pids = pool.pids
        scheduler.advance(by: .seconds(29))
        #expect(pool.processCount == 2, "they stay while the idle timeout runs")
        scheduler.advance(by: .seconds(1))
        run { pool.processCount == 0 && pids.allSatisfy { !alive($0) } }
        #expect(pool.processCount == 0, "idle decoders were let go")
        #expect(pids.allSatisfy { !alive($0) }, "and reaped")
    }

    @Test("one owner may have 16 images waiting for a decoder; the next is refused as busy, another owner's waits")
    func waitingCap() throws {
        let path = try #require(Self.decoder)
        // An agent's budget with the usual open-file limit: one app's 17 asks stay under it.
        let pool = runner(path, maxDecoders: 1, accounts: AgentAccounts(fileLimit: 8192))
        let png = TestImages.decodablePNG(width: 2, height: 2, rgba: (1, 2, 3, 255))
        _ = try decode(pool, png).get()
        let decoder = try #require(pool.pids.first)
        kill(decoder, SIGSTOP)  // what is sent to it waits; the rest waits in the pool
        var results: [String: [Result<DecodedPixels, DecodeFailure>]] = [:]
        for _ in 0...NetActivityLimits.maxDecoderWaitingPerApp + 1 {
            _ = pool.decode(image: image(png), ask: PixelAsk(), owner: "app:a") {
                results["app:a", default: []].append($0)
            }
        }
        _ = pool.decode(image: image(png), ask: PixelAsk(), owner: "app:b") { results["app:b", default: []].append($0) }
        run { results["app:a"]?.count == 1 }
        guard case .failure(.busy(let why))? = results["app:a"]?.first else {
            Issue.record("the 17th waiting image of one owner is refused: \(String(describing: results))")
            return
        }
        #expect(why.contains("app:a has 16 images waiting"), "\(why)")
        kill(decoder, SIGCONT)
        run { results["app:a"]?.count == NetActivityLimits.maxDecoderWaitingPerApp + 2 && results["app:b"]?.count == 1 }
        #expect(
            results["app:a"]?.filter { (try? $0.get()) != nil }.count == NetActivityLimits.maxDecoderWaitingPerApp + 1)
        #expect((try? results["app:b"]?.first?.get())?.width == 2, "another owner's image was decoded")
    }

    @Test("the next image is the one of the app running the fewest decodes: one app's queue never holds another's")
    func fairOrder() throws {
        let path = try #require(Self.decoder)
        let pool = runner(path, maxDecoders: 1)
        let png = TestImages.decodablePNG(width: 2, height: 2, rgba: (1, 2, 3, 255))
        _ = try decode(pool, png).get()
        let decoder = try #require(pool.pids.first)
        kill(decoder, SIGSTOP)
        var order: [String] = []
        for _ in 0..<8 {
            _ = pool.decode(image: image(png), ask: PixelAsk(), owner: "flatpak:a") { _ in order.append("a") }
        }
        _ = pool.decode(image: image(png), ask: PixelAsk(), owner: "app:b") { _ in order.append("b") }
        kill(decoder, SIGCONT)
        run { order.count == 9 }
        #expect(order.firstIndex(of: "b") == 1, "b's one image comes right after the one a had running: \(order)")
    }

    @Test("forked processes of the unscoped pool cannot fill the queue: past two fifths, each waits within its share")
    func forkedProcesses() throws {
        let path = try #require(Self.decoder)
        let pool = runner(path, maxDecoders: 1, accounts: AgentAccounts(fileLimit: 64 * 32))
        let png = TestImages.decodablePNG(width: 2, height: 2, rgba: (1, 2, 3, 255))
        _ = try decode(pool, png).get()
        let decoder = try #require(pool.pids.first)
        kill(decoder, SIGSTOP)
        var busy = 0
        for process in 0..<17 {
            for _ in 0..<NetActivityLimits.maxDecoderWaitingPerApp {
                _ = pool.decode(image: image(png), ask: PixelAsk(), owner: "unscoped/pid:\(process)") {
                    if case .failure(.busy) = $0 { busy += 1 }
                }
            }
        }
        var newcomer: Result<DecodedPixels, DecodeFailure>?
        _ = pool.decode(image: image(png), ask: PixelAsk(), owner: "app:newcomer") { newcomer = $0 }
        #expect(pool.waitingImages < 64, "the pool's processes hold less than the whole queue")
        kill(decoder, SIGCONT)
        run { newcomer != nil }
        #expect((try? newcomer?.get())?.width == 2, "another app is still admitted and decoded")
        #expect(busy > 0)
    }

    @Test("a cancelled request hears nothing; a missing decoder fails each request, saying so")
    func cancelAndMissing() throws {
        let path = try #require(Self.decoder)
        let pool = runner(path)
        var heard = false
        let cancel = pool.decode(
            image: image(TestImages.decodablePNG(width: 2, height: 2, rgba: (255, 0, 0, 255))), ask: PixelAsk()
        ) { _ in heard = true }
        cancel()
        // A request after it comes back: the cancelled one had its turn before it.
        _ = try decode(pool, TestImages.decodablePNG(width: 2, height: 2, rgba: (255, 0, 0, 255))).get()
        #expect(!heard)

        let none = runner("/nonexistent/netactivity-decoder")
        guard
            case .failure(.failed(let why)) = decode(
                none, TestImages.decodablePNG(width: 2, height: 2, rgba: (255, 0, 0, 255)))
        else {
            Issue.record("no decoder, no pixels")
            return
        }
        #expect(why.contains("could not be started"), "\(why)")
    }
}
