// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import LinuxKit
import NetActivityContract
import NetActivityCore
import Testing

@testable import NetActivityAgent

/// Who keeps whom (docs/architecture.md): services hold what they call strongly and call back
/// their holders weakly, and the handlers the scheduler keeps are `bound`, so the services the
/// agent wires go when it lets them go, however much they did meanwhile.
@Suite("Service lifetimes")
struct ServiceLifetimeTests {
    @Test("wired services that ran tasks, timers and downloads let each other go")
    func servicesGo() throws {
        weak var activity: ActivityService?
        weak var tasks: TaskService?
        weak var images: ImageCacheService?
        weak var downloads: DownloadService?
        weak var pixels: PixelTier?
        weak var decoding: Decoding?
        weak var context: AgentContext?
        do {
            let h = DriverHarness()
            activity = h.activity
            tasks = h.tasks
            images = h.images
            downloads = h.downloads
            pixels = h.downloads.pixels
            decoding = h.images.decoding
            context = h.context
            // Work that leaves timers, task objects and a transfer behind.
            try h.call(":1.5", ActivityMember.Method.incrementActivityCount.rawValue)
            let begun = try h.call(":1.5", ActivityMember.Method.beginTask.rawValue) { w in
                w.append("upload")
                try w.appendVardict([:])
            }
            #expect(begun?.kind == .methodReturn)
            let download = try h.call(":1.6", DownloaderMember.Method.downloadImage.rawValue, interface: .downloader) {
                w in
                w.append("http://images.test/a.png")
                try w.appendVardict([:])
            }
            #expect(download?.kind == .methodReturn)
            h.at(2)
            #expect(h.activity.isVisible)
            // A process name look-up holds its caller until the registry answers, as the bus's does.
            h.peers.deliverNames()
        }
        #expect(activity == nil)
        #expect(tasks == nil)
        #expect(images == nil)
        #expect(downloads == nil)
        #expect(pixels == nil)
        #expect(decoding == nil)
        #expect(context == nil)
    }
}
