// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
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

// 2. A window, as a UI author writes one in Swift 6: a main-actor class whose image slots and
// progress binding take main-actor closures (they touch the window's state; nothing is Sendable
// by hand). Each slot stands for an image view: a cache hit answers at once; a miss shows the
// placeholder, then the downloaded image, decoded off the main actor.
@MainActor
final class Window {
    private var slots: [ImageSlot<[UInt8]>] = []
    private var bar: ProgressBinding?
    private var waiting = 0
    private var done: CheckedContinuation<Void, Never>?
    /// The progress bar's last value, in percent.
    private(set) var shownProgress = 0

    /// Loads each URL into a slot of its own; returns when every slot has its answer.
    func show(_ urls: [String], from activity: NetActivity) async {
        waiting = urls.count
        for (i, url) in urls.enumerated() {
            let slot = ImageSlot(activity) { bytes in
                say("slot \(i): shows \(bytes.map { "\($0.count) bytes" } ?? "nothing")")
            }
            slot.setImage(
                url: url, placeholder: Array("placeholder".utf8),
                success: { image, source in
                    say("slot \(i): \(url) from the \(source == .cache ? "cache" : "downloader"), \(image.count) bytes")
                    self.answered()
                },
                failure: { error in
                    say("slot \(i): \(url) failed: \(error)")
                    self.answered()
                })
            slots.append(slot)
        }
        await withCheckedContinuation { done = $0 }
    }

    private func answered() {
        waiting -= 1
        if waiting == 0 { done?.resume() }
    }

    /// A progress bar bound to a transfer the app reports itself (any HTTP stack can).
    func follow(_ transfer: TrackedTransfer, with activity: NetActivity) {
        let bar = ProgressBinding(activity, direction: .download) { progress in
            self.shownProgress = Int(progress.fraction * 100)
        }
        if let task = transfer.task { bar.bind(to: task) }
        self.bar = bar
    }
}

let window = Window()
await window.show(urls, from: activity)

let transfer = await activity.beginTransfer("unpack the images", expectedToReceive: 4)
window.follow(transfer, with: activity)
transfer.didReceive(4)
transfer.finish()
for _ in 0..<500 where window.shownProgress < 100 { try await Task.sleep(for: .milliseconds(10)) }
say("progress bar: \(window.shownProgress) %")

let status = try await activity.status()
say("done; the agent holds \(status.activityCount) activity (it shows tasks for a few seconds more)")
activity.close()
