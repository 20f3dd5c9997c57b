// A newcomer's tour of NetActivityClient: fetches URLs through the tracked HTTP client (each
// request is a task at the agent) and fills image slots through the shared downloader and cache.
//
//     netactivity watch --tasks &          # the indicator and the tasks, as they change
//     netactivity-example URL...           # e.g. images served by `python3 -m http.server`
//
// Run it twice: the second time the slots answer from the shared cache and download nothing.
import AsyncHTTPClient
import Glibc
import NetActivityAsyncHTTPClient  // netactivity: code line 1 of 3 (it brings NetActivityClient along)

let urls = Array(CommandLine.arguments.dropFirst())
guard !urls.isEmpty, !urls.contains(where: { $0.hasPrefix("-") }) else {
    print("usage: netactivity-example URL...")
    print("Fetches each URL through the tracked HTTP client, then loads each into an image slot.")
    print("Follow it with `netactivity watch --tasks` in another terminal.")
    exit(urls.isEmpty ? 2 : 0)
}

/// Prints from any thread, one line at a time.
@Sendable func say(_ line: String) {
    let text = line + "\n"
    _ = text.withCString { write(1, $0, strlen($0)) }
}

let activity = await NetActivity.connect()  // netactivity: code line 2 of 3
say("connected as \(activity.uniqueName)")

// 1. Tracked requests: no counting by hand; each shows as a task with byte progress.
let http = TrackedHTTPClient(.shared, activity: activity)  // netactivity: code line 3 of 3
await withTaskGroup(of: Void.self) { group in
    for url in urls {
        group.addTask {
            do {
                let response = try await http.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
                let body = try await response.body.collect(upTo: 64 << 20)
                say("GET \(url): \(response.status.code), \(body.readableBytes) bytes")
            } catch {
                say("GET \(url): \(error)")
            }
        }
    }
}

// 2. Image slots: one per "view". A cache hit answers at once; a miss shows the placeholder,
// then the downloaded image. Here each slot prints what a view would show.
let remaining = AsyncStream<Void>.makeStream()
let pending = Counter(urls.count)
var slots: [ImageSlot<[UInt8]>] = []
for (i, url) in urls.enumerated() {
    let slot = ImageSlot(activity) { bytes in
        say("slot \(i): shows \(bytes.map { "\($0.count) bytes" } ?? "nothing")")
    }
    slot.setImage(url: url, placeholder: Array("placeholder".utf8), success: { image, source in
        say("slot \(i): \(url) from the \(source == .cache ? "cache" : "downloader"), \(image.count) bytes")
        if pending.decrement() == 0 { remaining.continuation.finish() }
    }, failure: { error in
        say("slot \(i): \(url) failed: \(error)")
        if pending.decrement() == 0 { remaining.continuation.finish() }
    })
    slots.append(slot)
}
for await _ in remaining.stream {}

let status = try await activity.status()
say("done; the agent holds \(status.activityCount) activity (it shows tasks for a few seconds more)")
activity.close()

/// A count shared by the slots' handlers (they run on the client's thread, one at a time).
final class Counter: @unchecked Sendable {
    private var value: Int
    init(_ value: Int) { self.value = value }
    func decrement() -> Int {
        value -= 1
        return value
    }
}
