// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// Generated from README.md and docs/*.md by scripts/readme-snippets.py (make readme-snippets): do not edit.
// Compiled, never run: what the snippets leave to the app is in Stubs.swift.
import AsyncHTTPClient
import FoundationNetworking
import NetActivityAsyncHTTPClient
import NetActivityClient
import NetActivityURLSession

// README.md, Swift block 1
@MainActor
func docsBlock1() async throws {
    let activity = await NetActivity.connect()          // never fails; or NetActivity() without await
    let feed = try await activity.withActivity(reason: "refresh feed") {   // the indicator counts this
        try await downloadFeed()
    }
}

// docs/library.md, Swift block 2
@MainActor
func docsBlock2() async throws {
    let activity = await NetActivity.connect()          // never fails; or NetActivity() without await
    let feed = try await activity.withActivity(reason: "refresh feed") {   // the indicator counts this
        try await downloadFeed()
    }
}

// docs/library.md, Swift block 3
@MainActor
func docsBlock3() async throws {
    // Counting by hand (a count belongs to this connection; it goes when the app quits).
    try await activity.incrementActivityCount()
    try await activity.decrementActivityCount()

    // A task that panels can list and follow (netactivity tasks, watch --tasks, ObjectManager).
    let upload = try await activity.beginTask("upload photo.jpg", expectedToSend: UInt64(photo.count))
    for try await sent in uploadProgress(photo) {
        try await upload.setProgress(sent: sent)          // sizes left out keep their value
    }
    // Work that is not bytes (pages rendered, files of a backup): a fraction, shown as a percentage.
    // try await task.setFraction(0.6)
    try await upload.complete()                           // or complete(error: "...")
    let path = await upload.path                          // its object path, nil until the agent has it

    // A task panels may cancel or pause (GNOME Shell's menu, KDE Plasma's job tracker, the tray's menu,
    // `netactivity tasks cancel N`): the app hears each request and decides.
    let backup = try await activity.beginTask("backup", cancellable: true, suspendable: true)
    Task {
        for await request in backup.requests {
            switch request {
            case .cancel: try? await backup.complete(error: "org.example.NetActivity.Error.Cancelled")
            case .suspend: try? await backup.suspend()                  // after pausing the work itself
            case .resume: try? await backup.resume()
            }
        }
    }

    // One shared downloader and cache for every app on the desktop (cancel the Swift task to stop it).
    let avatar = try await activity.downloadImage(url: "https://example.com/avatar.png")

    // Follow the indicator (nil while no agent runs).
    for await status in activity.statusUpdates() {
        print(status?.visible == true ? "busy" : "idle")
    }
}

// docs/library.md, Swift block 4
@MainActor
func docsBlock4() async throws {
    NetActivity.runMainActorOnGLibMainContext()   // before gtk_main / g_application_run; false without GLib
    let activity = await NetActivity.connect()
    let executor = CallbackExecutor.glibMainContext()   // the executor form, for code off the main actor
}

// docs/library.md, Swift block 5
@MainActor
func docsBlock5() async throws {
    let photo = try await activity.fetchPixels(url: "https://example.com/photo.jpg", maxWidth: 256, maxHeight: 256)
    print(photo.width, photo.height, photo.stride, photo.format)   // premultiplied B8G8R8A8, fit to the box
    photo.withUnsafeBytes { pixels in
        // Hand `pixels` (stride x height bytes) to the toolkit as they are: GTK 4's
        // gdk_memory_texture_new with GDK_MEMORY_B8G8R8A8_PREMULTIPLIED, cairo's ARGB32, Qt's
        // Format_ARGB32_Premultiplied (little-endian). Keep `photo` alive while they are used.
        _ = pixels.count
    }
}

// docs/library.md, Swift block 6
@MainActor
func docsBlock6() async throws {
    let thumbnail = ImageSlot(activity, maxWidth: 64, maxHeight: 64, pixels: { Texture(pixels: $0) },
                              apply: { picture.texture = $0 })
    thumbnail.setImage(url: user.avatarURL)   // the same slot rules as below; the box is part of the key
}

// docs/library.md, Swift block 7
@MainActor
func docsBlock7() async throws {
    let http = TrackedHTTPClient(.shared, activity: activity)        // the one line to adopt
    let response = try await http.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
    let body = try await response.body.collect(upTo: 1 << 20)         // a task at the agent until here

    let web = TrackedURLSession(activity: activity)
    let (data, _) = try await web.data(for: URLRequest(url: someURL))
    let task = await web.dataTask(with: request)   // starts suspended; resume()/suspend() show at the agent

    // Views: bind to any task path (another app's, from `netactivity tasks`) or to one of yours (begun
    // on any of the app's connections). Made on the main actor, the closures run there.
    let spinner = TaskSpinnerBinding(activity) { animating in view.spinning = animating }
    spinner.bind(toTaskAt: "/org/example/NetActivity/tasks/7")
    spinner.bind(to: upload)                                            // rebinding drops the old task
    let refresh = RefreshControlBinding(activity) { refreshing in pull.refreshing = refreshing }
    let bar = ProgressBinding(activity, direction: .download) { p in progressBar.fraction = p.fraction }
    bar.bind(to: download)                       // a task begun with beginTask(..., expectedToReceive:)
    try await download.setProgress(received: 512 << 10)                 // the bar shows 50 %

    // The same as async sequences, for code that awaits (each ends when its binding would stop):
    for await p in activity.progress(of: upload, direction: .upload) { print(Int(p.fraction * 100), "%") }
    for await spinning in activity.spinnerStates(ofTaskAt: path) { view.spinning = spinning }

    // Image views (and buttons: one slot per state) over the shared downloader and cache. `decode` runs
    // off the main actor and hands its image over (`sending`): Pixbuf need not be Sendable.
    let avatar = ImageSlot(activity, decode: { Pixbuf(bytes: $0) }, apply: { image in imageView.image = image })
    avatar.setImage(url: user.avatarURL, placeholder: silhouette)     // a String or a URL
}

// docs/library.md, Swift block 8
@MainActor
final class PhotoWindow {
    let imageView = ImageView()
    let progressBar = ProgressBar()
    private var photo: ImageSlot<Pixbuf>?
    private var bar: ProgressBinding?

    func show(_ url: String, activity: NetActivity) {
        let slot = ImageSlot(activity, decode: { Pixbuf(bytes: $0) }, apply: { self.imageView.image = $0 })
        slot.setImage(url: url, placeholder: silhouette)   // the placeholder shows before this returns
        photo = slot
        bar = ProgressBinding(activity, direction: .download) { self.progressBar.fraction = $0.fraction }
    }
}
