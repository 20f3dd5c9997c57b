// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract
import NetActivityCore
import Testing

@testable import NetActivityAgent

/// Prefetch on the manual clock: what it feeds the downloader when, what it charges, what it tells.
@Suite("Prefetching: fed one URL at a time into free slots, charged to the app, told to its owner")
struct PrefetchingTests {
    /// A downloader with `slots` slots that starts what it is given and lets the test end it.
    final class Downloader: PrefetchDownloader {
        var slots = 3
        var network = true
        var started:
            [(url: String, owner: String, handle: String, end: (Result<Void, ImageDownloader.Failure>) -> Void)] =
                []
        var cancelled: [String] = []
        var cached: Set<String> = []

        func mayDownload(_ owner: String) throws(NetActivityError) {
            if !network { throw .accessDenied("\(owner) may not use the network") }
        }
        func roomForPrefetch(running: Int) -> Bool { slots == 1 ? running == 0 : running < slots - 1 }
        func startPrefetch(
            url: String, owner: String, app: String, started: Double,
            handler: @escaping (Result<Void, ImageDownloader.Failure>) -> Void
        ) -> ImageDownloader.Ticket {
            if cached.contains(url) { return .cached }
            let handle = "h\(self.started.count)"
            self.started.append((url, owner, handle, handler))
            return .receipt(handle, transfer: UInt64(self.started.count))
        }
        func cancelPrefetch(_ handle: String) {
            cancelled.append(handle)
            if let i = started.firstIndex(where: { $0.handle == handle }) { started[i].end(.failure(.cancelled)) }
        }
        func touchOnDisk(_ key: String) {}
    }

    let h = DriverHarness()
    let downloader = Downloader()
    let prefetching: Prefetching

    init() {
        prefetching = Prefetching(context: h.context, downloads: downloader)
        h.peers.identities[":1.7"] = ClientIdentity(app: "app:org.example.Gallery")
    }

    func urls(_ n: Int, _ tag: String = "a") -> [String] { (0..<n).map { "https://img.example.org/\(tag)/\($0).png" } }

    /// PrefetchFinished signals: (destination, receipt, stored, failed).
    func finished() -> [(String, String, UInt32, UInt32)] {
        h.signals.compactMap { entry in
            guard entry.message.member == DownloaderMember.Signal.prefetchFinished.rawValue else { return nil }
            var r = entry.message.reader()
            guard let receipt = try? r.read(String.self), let stored = try? r.read(UInt32.self),
                let failed = try? r.read(UInt32.self)
            else { return nil }
            return (entry.message.destination ?? "", receipt, stored, failed)
        }
    }

    @Test("URLs start on the next turn, into all but one free slot; each end lets the next in; the owner hears the sum")
    func feeding() throws {
        let receipt = try prefetching.prefetch(urls: urls(5) + urls(1), options: [:], owner: ":1.7")
        #expect(downloader.started.isEmpty, "never inside the call")
        #expect(h.context.accounts[.prefetchURLs].held(byApp: "app:org.example.Gallery") == 5, "a repeat counts once")
        h.at(0.001)
        #expect(downloader.started.map(\.url) == Array(urls(5).prefix(2)), "one slot of three stays free")
        downloader.started[0].end(.success(()))
        h.at(0.002)
        #expect(downloader.started.count == 3)
        downloader.started[1].end(.failure(.failed(NetActivityError(.http, "404"))))
        h.at(0.003)
        for i in 2..<5 {
            downloader.started[i].end(.success(()))
            h.at(0.003 + Double(i) / 1000)
        }
        #expect(downloader.started.count == 5)
        h.at(0.1)
        #expect(finished().map { "\($0.0) \($0.1) \($0.2) \($0.3)" } == [":1.7 \(receipt) 4 1"])
        #expect(h.context.accounts[.prefetchURLs].held(byApp: "app:org.example.Gallery") == 0)
    }

    @Test("an app's own request holds prefetch back for 100 ms; held (metered, asleep) starts nothing until let go")
    func quietAfterRequest() throws {
        h.at(1)
        _ = try prefetching.prefetch(urls: urls(4), options: [:], owner: ":1.7")
        prefetching.requested()
        h.at(1.05)
        #expect(downloader.started.isEmpty)
        h.at(1.11)
        #expect(downloader.started.count == 2)
        prefetching.held = true
        downloader.started[0].end(.success(()))
        h.at(1.2)
        #expect(downloader.started.count == 2, "held: nothing new")
        prefetching.held = false
        h.at(1.21)
        #expect(downloader.started.count == 3)
    }

    @Test("CancelPrefetch: the owner's alone; waiting URLs go, running ones are cancelled; the charge goes with them")
    func cancel() throws {
        let receipt = try prefetching.prefetch(urls: urls(6), options: [:], owner: ":1.7")
        h.at(0.001)
        #expect(throws: NetActivityError.self) { try prefetching.cancel(receipt: receipt, urls: [], by: ":1.8") }
        let some = try prefetching.cancel(receipt: receipt, urls: [urls(6)[0], urls(6)[5]], by: ":1.7")
        #expect(some == 2)
        #expect(downloader.cancelled == ["h0"])
        #expect(h.context.accounts[.prefetchURLs].held(byApp: "app:org.example.Gallery") == 4)
        #expect(try prefetching.cancel(receipt: receipt, urls: [], by: ":1.7") == 4)
        #expect(h.context.accounts[.prefetchURLs].held(byApp: "app:org.example.Gallery") == 0)
        #expect(try prefetching.cancel(receipt: receipt, urls: [], by: ":1.7") == 0, "a receipt that is gone")
    }

    @Test("the owner leaves: its prefetches go and release their charge; a cached URL counts as stored")
    func departure() throws {
        downloader.cached = [urls(3)[0]]
        _ = try prefetching.prefetch(urls: urls(3), options: [:], owner: ":1.7")
        h.at(0.001)
        #expect(downloader.started.map(\.url) == [urls(3)[1], urls(3)[2]].prefix(2).map { $0 })
        #expect(prefetching.ownerVanished(":1.7"), "URLs under way: the downloader's receipts are the owner's to drop")
        #expect(h.context.accounts[.prefetchURLs].held(byApp: "app:org.example.Gallery") == 0)
        #expect(prefetching.waitingCount == 0)
    }

    @Test("a sandbox without the network, an option, a bad URL, an app past its limit: refused, nothing charged")
    func refusals() throws {
        downloader.network = false
        #expect(throws: NetActivityError.self) { try prefetching.prefetch(urls: urls(1), options: [:], owner: ":1.7") }
        downloader.network = true
        #expect(throws: NetActivityError.self) {
            try prefetching.prefetch(urls: urls(1), options: ["priority": .string("high")], owner: ":1.7")
        }
        do {
            _ = try prefetching.prefetch(urls: urls(2) + ["ftp://x/y.png"], options: [:], owner: ":1.7")
            Issue.record("a bad URL was taken")
        } catch {
            #expect(error.message.hasPrefix("URL 3 of 3"))
        }
        let limit = NetActivityLimits.maxPrefetchURLsPerApp
        _ = try prefetching.prefetch(urls: urls(limit), options: [:], owner: ":1.7")
        h.peers.identities[":1.8"] = ClientIdentity(app: "app:org.example.Gallery")
        #expect(throws: NetActivityError.self) {
            try prefetching.prefetch(urls: urls(1, "b"), options: [:], owner: ":1.8")
        }
        #expect(h.context.accounts[.prefetchURLs].held(byApp: "app:org.example.Gallery") == limit)
    }
}
