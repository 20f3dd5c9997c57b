// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Dispatch
import Glibc
import NetActivityClient
import NetActivityTesting
import Synchronization
import Testing

/// A view the way a Swift 6 UI has one: main-actor state, touched by main-actor closures.
@MainActor
final class PictureView {
    var shown: [[UInt8]?] = []
    var sources: [ImageSource] = []
}

/// The main-actor faces (`ImageSlot`, the bindings' main-actor forms) against the real agent.
@Suite("Main-actor image slots", .serialized, .timeLimit(.minutes(1)))
@MainActor
struct MainActorSlotTests {
    let bus: TestBus
    let server: LocalHTTPServer
    let activity: NetActivity
    let a = TestImages.png(width: 1, height: 1)
    let placeholder: [UInt8] = [9, 9]

    init() async throws {
        bus = try TestBus()
        try await bus.startAgent()
        server = try LocalHTTPServer(files: [
            "a.png": a, "slow.png": a, "repeat.png": a, "older.png": a, "blocker.png": a, "hidden.png": a,
            "shown.png": a, "half.png": TestImages.decodablePNG(width: 2, height: 2, rgba: (255, 255, 255, 128)),
        ])
        activity = await NetActivity.connect(address: bus.address)
    }

    func until(_ condition: () -> Bool) async throws {
        for _ in 0..<500 where !condition() { try await Task.sleep(for: .milliseconds(10)) }
        #expect(condition())
    }

    @Test("setImage shows the placeholder before it returns, even with the agent stopped (SIGSTOP); the image follows")
    func placeholderIsSynchronous() async throws {
        let view = PictureView()
        let slot = ImageSlot<Picture>(activity, decode: { Picture($0) }, apply: { view.shown.append($0?.bytes) })
        kill(bus.agentPID, SIGSTOP)
        slot.setImage(url: server.url("a.png"), placeholder: Picture(placeholder))
        #expect(view.shown == [placeholder], "within the call, not at a deadline")
        kill(bus.agentPID, SIGCONT)
        try await until { view.shown.count == 2 }
        #expect(view.shown == [placeholder, a])
        activity.close()
    }

    @Test("a slot scrolled out of sight (setVisible(false)) waits behind one that shows, though it asked first")
    func hiddenSlotsWait() async throws {
        #expect(try bus.setMaximumActiveDownloads(1) == 0)
        let blocker = Task { try await activity.fetchImage(url: server.url("gate/blocker.png")) }
        try await until { server.count("/gate/blocker.png") == 1 }
        let view = PictureView()
        let hidden = ImageSlot<Picture>(activity, decode: { Picture($0) }, apply: { view.shown.append($0?.bytes) })
        let shown = ImageSlot<Picture>(activity, decode: { Picture($0) }, apply: { view.shown.append($0?.bytes) })
        hidden.setImage(url: server.url("hidden.png"))
        shown.setImage(url: server.url("shown.png"))
        hidden.setVisible(false)
        // A call on the same connection after SetPriority: when it is answered, the agent has it.
        _ = try await activity.image(url: server.url("none.png"))
        server.openGate("blocker.png")
        _ = try await blocker.value
        try await until { view.shown.count == 4 }
        #expect(server.requests().filter { $0 != "/gate/blocker.png" } == ["/shown.png", "/hidden.png"])
        activity.close()
    }

    @Test("an image shown once shows again synchronously, from the app's memory tier, with no call")
    func repeatIsSynchronous() async throws {
        let view = PictureView()
        let first = ImageSlot<Picture>(activity, decode: { Picture($0) }, apply: { view.shown.append($0?.bytes) })
        let url = server.url("repeat.png")
        first.setImage(url: url, placeholder: Picture(placeholder))
        try await until { view.shown.count == 2 }
        kill(bus.agentPID, SIGSTOP)
        defer { kill(bus.agentPID, SIGCONT) }
        let second = ImageSlot<Picture>(activity, decode: { Picture($0) }, apply: { view.shown.append($0?.bytes) })
        second.setImage(
            url: url, placeholder: Picture(placeholder),
            success: { image, source in
                view.shown.append(image.bytes)
                view.sources.append(source)
            })
        #expect(view.shown == [placeholder, a, a], "no placeholder: the image, before setImage returned")
        #expect(view.sources == [.cache])
        #expect(ImageSlotMemory.count >= 1)
        ImageSlotMemory.removeAll()
        #expect(ImageSlotMemory.count == 0)
        activity.close()
    }

    @Test("decode runs off the main actor: the main actor turns while a decode is under way")
    func decodeOffTheMainActor() async throws {
        let decoding = Atomic<Bool>(false)
        let mainTurned = DispatchSemaphore(value: 0)
        let decodedOnMain = Atomic<Bool>(true)
        let mainThread = pthread_self()
        let view = PictureView()
        let slot = ImageSlot<Picture>(
            activity,
            decode: { bytes in
                decodedOnMain.store(pthread_equal(pthread_self(), mainThread) != 0, ordering: .relaxed)
                decoding.store(true, ordering: .relaxed)
                // A large decode: it goes on until the main actor has run meanwhile (it never would
                // if the decode held it), or 10 s.
                _ = mainTurned.wait(timeout: .now() + 10)
                return Picture(bytes)
            }, apply: { view.shown.append($0?.bytes) })
        slot.setImage(url: server.url("slow.png"))
        var turned = false
        for _ in 0..<1000 where !turned {
            try await Task.sleep(for: .milliseconds(5))
            if decoding.load(ordering: .relaxed) {
                turned = true
                mainTurned.signal()
            }
        }
        #expect(turned, "the main actor ran while the decode was under way")
        try await until { view.shown.count == 2 }
        #expect(view.shown.last == a)
        let onMain = decodedOnMain.load(ordering: .relaxed)
        #expect(!onMain, "decode ran on the main thread")
        activity.close()
    }

    @Test("a newer request wins over an older one whose decode finishes later")
    func newerRequestWins() async throws {
        let release = DispatchSemaphore(value: 0)
        let olderEntered = Atomic<Bool>(false)
        let olderReleased = Atomic<Bool>(false)
        let view = PictureView()
        let slot = ImageSlot<Picture>(
            activity,
            decode: { bytes in
                if bytes != a { return Picture(bytes) }  // the newer request's image
                olderEntered.store(true, ordering: .relaxed)
                _ = release.wait(timeout: .now() + 10)
                // Let go once the slot has had it: shown (wrongly) or dropped on the main actor.
                return Picture(bytes) { olderReleased.store(true, ordering: .relaxed) }
            }, apply: { view.shown.append($0?.bytes) })
        let b = TestImages.png(width: 2, height: 2)
        let other = try LocalHTTPServer(files: ["b.png": b])
        defer { other.stop() }
        slot.setImage(url: server.url("older.png"))
        try await until { olderEntered.load(ordering: .relaxed) }
        slot.setImage(url: other.url("b.png"), placeholder: Picture(placeholder))
        try await until { view.shown.last == b }
        release.signal()
        // The older image reached the main actor and was let go there: had it been applied, it
        // would be in the view by now.
        try await until { olderReleased.load(ordering: .relaxed) }
        #expect(view.shown == [nil, placeholder, b], "the older image never overwrote the newer one")
        activity.close()
    }

    @Test("the bindings' main-actor forms touch main-actor state with no Sendable closures")
    func bindings() async throws {
        var spinning: [Bool] = []
        var percents: [Int] = []
        let spinner = TaskSpinnerBinding(activity) { spinning.append($0) }
        let bar = ProgressBinding(activity, direction: .download) { percents.append(Int($0.fraction * 100)) }
        let task = try await activity.beginTask("main-actor download", expectedToReceive: 10)
        spinner.bind(to: task)
        bar.bind(to: task)
        try await task.setProgress(received: 5)
        try await task.setProgress(received: 10)
        try await task.complete()
        try await until { spinning.last == false && percents.last == 100 }
        #expect(spinning.first == true)
        #expect(percents == percents.sorted() && percents.first! < 100, "it filled the bar in steps: \(percents)")
        activity.close()
    }

    @Test(
        "a main-actor pixel slot shows the texture; a second slot for the same box shows it from the app's memory, in the call"
    )
    func pixelSlots() async throws {
        var shown: [Texture?] = []
        let slot = ImageSlot<Texture>(activity, maxWidth: 8, pixels: { Texture($0) }, apply: { shown.append($0) })
        slot.setImage(url: server.url("half.png"))
        #expect(shown == [nil], "the placeholder (none), in the call")
        for _ in 0..<500 where shown.count < 2 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(shown.count == 2 && shown[1]?.corner == [128, 128, 128, 128], "white at half alpha, premultiplied")
        var again: [Texture?] = []
        let second = ImageSlot<Texture>(activity, maxWidth: 8, pixels: { Texture($0) }, apply: { again.append($0) })
        second.setImage(url: server.url("half.png"))
        #expect(again.count == 1 && again[0]?.width == 2, "synchronously, with no call")
        var otherBox: [Texture?] = []
        let third = ImageSlot<Texture>(activity, maxWidth: 1, pixels: { Texture($0) }, apply: { otherBox.append($0) })
        third.setImage(url: server.url("half.png"))
        #expect(otherBox.count == 1 && otherBox[0] == nil, "another box is another image: the placeholder first")
        activity.close()
    }
}
