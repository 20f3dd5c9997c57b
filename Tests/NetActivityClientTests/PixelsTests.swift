// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityClient
import NetActivityTesting
import Testing

/// `fetchPixels` against the real agent and its decoder: the pixels mapped from the agent's sealed
/// memory, decoded once for two apps, fit to a box; errors by name.
@Suite("Decoded pixels", .serialized, .timeLimit(.minutes(1)))
struct PixelsTests {
    let bus: TestBus
    let server: LocalHTTPServer
    let activity: NetActivity

    init() async throws {
        bus = try TestBus()
        try await bus.startAgent()
        server = try LocalHTTPServer(files: [
            "teal.png": TestImages.decodablePNG(width: 40, height: 20, rgba: (0, 128, 128, 255)),
            "half.png": TestImages.decodablePNG(width: 2, height: 2, rgba: (255, 255, 255, 128)),
            "text.png": Array("not an image".utf8),
            "dots.gif": TestImages.animatedGIF(colors: [(255, 0, 0), (0, 0, 255)], hundredths: 25, repeats: 2),
        ])
        activity = await NetActivity.connect(address: bus.address)
    }

    @Test("pixels come mapped read-only, premultiplied BGRA; a second app gets the same from the agent's memory")
    func pixels() async throws {
        let image = try await activity.fetchPixels(url: server.url("teal.png"))
        #expect((image.width, image.height, image.stride) == (40, 20, 160))
        #expect(image.format == "B8G8R8A8_PREMULTIPLIED")
        #expect((image.originalWidth, image.originalHeight) == (40, 20))
        #expect(image.source == .download)
        #expect(image.contentType == "image/png")
        #expect(image.pixel(x: 39, y: 19) == (128, 128, 0, 255))
        #expect(image.withUnsafeBytes { $0.count } == 3200)
        let half = try await activity.fetchPixels(url: server.url("half.png"))
        #expect(half.pixel(x: 0, y: 0) == (128, 128, 128, 128), "white at half alpha, premultiplied")

        let other = await NetActivity.connect(address: bus.address)
        let again = try await other.fetchPixels(url: server.url("teal.png"))
        #expect(again.source == .cache)
        #expect(again.withUnsafeBytes { Array($0) } == image.withUnsafeBytes { Array($0) })
        #expect(server.count("/teal.png") == 1)
        other.close()
    }

    @Test("an animation comes frame after frame with its durations; without asking, its first frame")
    func animation() async throws {
        let still = try await activity.fetchPixels(url: server.url("dots.gif"))
        #expect((still.frameCount, still.framesInFile, still.frameDurations) == (1, 2, []))
        #expect(still.pixel(x: 0, y: 0) == (0, 0, 255, 255) && still.pixel(x: 1, y: 0).3 == 0)
        let moving = try await activity.fetchPixels(url: server.url("dots.gif"), animation: true)
        #expect(
            (moving.frameCount, moving.frameDurations, moving.loopCount) == (
                2, [.milliseconds(250), .milliseconds(250)], 3
            ))
        #expect(moving.pixel(x: 1, y: 0, frame: 0).3 == 0, "the first frame: its dot alone")
        #expect(moving.pixel(x: 0, y: 0, frame: 1) == (0, 0, 255, 255), "the second keeps the first's dot")
        #expect(moving.pixel(x: 1, y: 0, frame: 1) == (255, 0, 0, 255))
        #expect(moving.withUnsafeBytes(frame: 1) { $0.count } == 8)
        #expect(moving.colorSpace == .srgb && moving.colorProfile == DecodedImage.ColorProfile.none)
    }

    @Test("a box gives the fitted size; errors come by name")
    func boxAndErrors() async throws {
        let small = try await activity.fetchPixels(url: server.url("teal.png"), maxWidth: 10, maxHeight: 10)
        #expect((small.width, small.height) == (10, 5))
        #expect((small.originalWidth, small.originalHeight) == (40, 20))
        do {
            _ = try await activity.fetchPixels(url: server.url("text.png"))
            Issue.record("text is not an image")
        } catch {
            #expect(error.code == .agent("NotAnImage"))
        }
        do {
            _ = try await activity.fetchPixels(url: server.url("missing.png"))
            Issue.record("a 404 is an error")
        } catch {
            #expect(error.code == .agent("HTTP"))
        }
    }

    @Test("a pixel slot delivers the agent's pixels in its box; a bytes slot on the same URL gets the encoded image")
    func executorSlots() async throws {
        let shown = Recorder<(UInt32, UInt32, ImageSource)>()
        let pixels = ExecutorImageSlot<DecodedImage>(
            activity, callbacks: activity.callbacks, placeholderDelay: .seconds(10), maxWidth: 10, maxHeight: 10
        ) { _ in }
        pixels.setImage(url: server.url("teal.png"), success: { shown.append(($0.width, $0.height, $1)) })
        let first = try await shown.wait(for: 1)
        #expect(first.count == 1 && first[0].0 == 10 && first[0].1 == 5 && first[0].2 == .download)

        let bytes = Recorder<[UInt8]>()
        let encoded = ExecutorImageSlot<[UInt8]>(activity, callbacks: activity.callbacks) {
            if let b = $0 { bytes.append(b) }
        }
        encoded.setImage(url: server.url("teal.png"))
        #expect(try await bytes.wait(for: 1)[0].starts(with: [0x89, 0x50, 0x4E, 0x47]), "the PNG itself")

        // The app's own type, made from the mapped pixels off the callbacks' executor.
        let made = Recorder<Texture>()
        let textures = ExecutorImageSlot<Texture>(
            activity, callbacks: activity.callbacks, maxWidth: 20, pixels: { Texture($0) },
            apply: { if let t = $0 { made.append(t) } })
        textures.setImage(url: server.url("teal.png"))
        let texture = try await made.wait(for: 1)[0]
        #expect((texture.width, texture.height, texture.corner) == (20, 10, [128, 128, 0, 255]))
    }
}

/// What an app makes from the agent's pixels: its own texture type (here its size and a corner).
struct Texture: Equatable {
    let width: UInt32
    let height: UInt32
    let corner: [UInt8]
    init(_ image: DecodedImage) {
        width = image.width
        height = image.height
        let p = image.pixel(x: Int(image.width) - 1, y: Int(image.height) - 1)
        corner = [p.0, p.1, p.2, p.3]
    }
}
