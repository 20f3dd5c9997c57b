// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityContract
import NetActivityCore
import NetActivityTesting
import Testing

/// AFImageDownloaderTests' behaviours, and the faults AFNetworking had, with a gated fake fetcher.
@Suite("Image downloader")
struct ImageDownloaderTests {
    final class Harness {
        let fetcher = FakeFetcher()
        var cache: [String: [UInt8]] = [:]
        var stores: [String] = []
        enum Outcome: Equatable { case ok, failed(ImageDownloader.Failure) }
        var results: [String: Outcome] = [:]
        /// The transfer each URL's last request joined or began.
        var transferIDs: [String: UInt64] = [:]
        var downloader: ImageDownloader!

        init(max: Int = 4, order: ImageDownloader.Prioritization = .fifo) {
            downloader = ImageDownloader(
                maximumActiveDownloads: max, prioritization: order,
                isCached: { [unowned self] key, _, _ in self.cache[key] != nil },
                store: { [unowned self] key, fetched, _, _ in
                    self.stores.append(key)
                    self.cache[key] = fetched.bytes
                    return .success(())
                },
                fetch: fetcher.fetch)
        }

        /// Downloads `url` (key = url) for `owner`; returns the receipt ("" on a cache hit).
        @discardableResult
        func get(
            _ url: String, owner: String = ":1.1", app: String? = nil, reload: Bool = false,
            priority: ImageDownloader.Priority = .normal,
            label: String? = nil
        ) -> String {
            switch downloader.download(
                url: url, key: url, owner: owner, app: app, reload: reload, priority: priority,
                handler: { [unowned self] result in
                    switch result {
                    case .success: self.results[label ?? url] = .ok
                    case .failure(let f): self.results[label ?? url] = .failed(f)
                    }
                })
            {
            case .cached: return ""
            case .receipt(let r, let transfer):
                transferIDs[url] = transfer
                return r
            }
        }
    }

    /// Finishes the running transfers one by one, each start's successor seen as it comes: the
    /// order queued work started in after the `blocker`.
    func drain(_ h: Harness, after blocker: String) -> [String] {
        let before = h.fetcher.startedURLs.count
        h.fetcher.succeed(h.fetcher.transfer(for: blocker)!)
        var order: [String] = []
        while h.fetcher.startedURLs.count > before + order.count {
            let url = h.fetcher.startedURLs[before + order.count]
            order.append(url)
            h.fetcher.succeed(h.fetcher.transfer(for: url)!)
        }
        return order
    }

    @Test("max-age: the memory check hears it, and the transfer takes the smallest its waiters gave before it started")
    func maxAge() {
        var asked: [Double?] = []
        let fetcher = FakeFetcher()
        let d = ImageDownloader(
            maximumActiveDownloads: 1,
            isCached: { _, _, maxAge in
                asked.append(maxAge)
                return maxAge == 3600
            },
            store: { _, _, _, _ in .success(()) }, fetch: fetcher.fetch)
        func get(_ url: String, maxAge: Double?) -> ImageDownloader.Ticket {
            d.download(url: url, key: url, owner: ":1.1", maxAge: maxAge, handler: { _ in })
        }
        guard case .cached = get("a", maxAge: 3600) else {
            Issue.record("a copy young enough answers")
            return
        }
        _ = get("blocker", maxAge: nil)
        _ = get("b", maxAge: 60)
        _ = get("b", maxAge: 10)
        _ = get("b", maxAge: 30)
        _ = get("b", maxAge: nil)
        #expect(asked == [3600, nil, 60, 10, 30, nil])
        fetcher.succeed(fetcher.transfer(for: "blocker")!)
        #expect(fetcher.started.map(\.url) == ["blocker", "b"])
        #expect(fetcher.started.map(\.maxAge) == [nil, 10], "the strictest of its waiters")
        _ = get("b", maxAge: 1)
        #expect(fetcher.started.last?.maxAge == 10, "joining a running transfer takes its answer")
    }

    @Test("the highest priority starts first, FIFO within one; LIFO within one too")
    func priorityOrder() {
        for (order, expected) in [
            (ImageDownloader.Prioritization.fifo, ["d", "c", "a", "e", "b"]), (.lifo, ["d", "c", "e", "a", "b"]),
        ] {
            let h = Harness(max: 1, order: order)
            h.get("blocker")
            h.get("a")
            h.get("b", priority: .low)
            h.get("c", priority: .high)
            h.get("d", priority: .veryHigh)
            h.get("e")
            #expect(drain(h, after: "blocker") == expected, "\(order)")
        }
    }

    /// One slot, held by A's blocker; A queues X (very-low), Y and Z; B (`:1.2`) asks for X at
    /// very-high. Returns the harness and B's receipt.
    func xJoinedByB() -> (Harness, String) {
        let h = Harness(max: 1)
        h.get("blocker", app: "A")
        h.get("X", owner: ":1.1", app: "A", priority: .veryLow)
        h.get("Y", owner: ":1.1", app: "A")
        h.get("Z", owner: ":1.1", app: "A")
        let b = h.get("X", owner: ":1.2", app: "B", priority: .veryHigh, label: "X by B")
        return (h, b)
    }

    @Test(
        "a transfer runs at the highest priority of its receipts, across apps: joined at very-high it jumps the queue, and drops back when that receipt goes"
    )
    func priorityInheritance() {
        // B joins at very-high: X starts next.
        var (h, b) = xJoinedByB()
        #expect(h.downloader.priority(ofTransfer: h.transferIDs["X"]!) == .veryHigh)
        #expect(drain(h, after: "blocker") == ["X", "Y", "Z"])
        #expect(h.results["X"] == .ok && h.results["X by B"] == .ok)

        // B cancels before a slot frees: X is very-low again, behind Y and Z.
        (h, b) = xJoinedByB()
        #expect(h.downloader.cancel(receipt: b))
        #expect(h.downloader.priority(ofTransfer: h.transferIDs["X"]!) == .veryLow)
        #expect(drain(h, after: "blocker") == ["Y", "Z", "X"])
        #expect(h.results["X by B"] == .failed(.cancelled) && h.results["X"] == .ok)

        // B leaves the bus: the same.
        (h, _) = xJoinedByB()
        h.downloader.ownerVanished(":1.2")
        #expect(drain(h, after: "blocker") == ["Y", "Z", "X"])
    }

    @Test(
        "held (metered, power-saver), very-low work waits while the rest runs; joined at a higher priority it runs; released, it starts"
    )
    func holdingVeryLow() {
        let h = Harness(max: 2)
        h.downloader.holdingVeryLow = true
        h.get("later", priority: .veryLow)
        h.get("now")
        h.get("lifted", priority: .veryLow)
        #expect(h.fetcher.startedURLs == ["now"], "a free slot stays free rather than run held work")
        #expect(h.downloader.heldCount == 2 && h.downloader.queuedCount == 2)
        #expect(!h.downloader.yieldSlot(h.fetcher.transfer(for: "now")!), "held work is not work waiting for a slot")
        h.get("lifted", owner: ":1.2", app: "B", priority: .normal)
        #expect(
            h.fetcher.startedURLs == ["now", "lifted"], "a normal receipt lifted it out of the hold, into the free slot"
        )
        #expect(h.downloader.heldCount == 1)
        h.fetcher.succeed(h.fetcher.transfer(for: "now")!)
        #expect(h.fetcher.startedURLs == ["now", "lifted"], "a freed slot stays free rather than run held work")
        h.downloader.holdingVeryLow = false
        #expect(h.fetcher.startedURLs == ["now", "lifted", "later"], "released, it starts at once")
        #expect(h.downloader.heldCount == 0)
    }

    @Test(
        "before sleep every running transfer stops and waits again with its receipts; nothing starts until it wakes; then they run first"
    )
    func pauseAndResume() {
        let h = Harness(max: 2)
        h.get("a")
        h.get("b")
        h.get("c")
        let a = h.fetcher.transfer(for: "a")!
        h.downloader.pauseAll()
        #expect(h.fetcher.cancelled.sorted() == [a, h.transferIDs["b"]!].sorted())
        #expect(h.downloader.activeCount == 0 && h.downloader.queuedCount == 3)
        h.fetcher.deliverLate(a)
        #expect(h.results["a"] == nil, "a late completion of a stopped fetch is not an answer")
        h.get("d", priority: .veryHigh)
        #expect(h.fetcher.startedCount == 2, "nothing starts while asleep")
        h.downloader.resumeAll()
        #expect(
            Array(h.fetcher.startedURLs.dropFirst(2)) == ["d", "a"], "the highest first, then the stopped ones in order"
        )
        while let t = h.fetcher.running.first { h.fetcher.succeed(t) }
        #expect(
            ["a", "b", "c", "d"].allSatisfy { h.results[$0] == .ok }, "every receipt is answered once it ran again")
    }

    @Test("SetPriority moves a pending receipt's transfer up and down; unknown or finished receipts say false")
    func setPriority() {
        let h = Harness(max: 1)
        h.get("blocker")
        let a = h.get("a")
        h.get("b")
        let c = h.get("c")
        #expect(h.downloader.setPriority(.high, receipt: c))
        #expect(h.downloader.setPriority(.veryLow, receipt: a))
        #expect(!h.downloader.setPriority(.high, receipt: "r999"))
        #expect(drain(h, after: "blocker") == ["c", "b", "a"])
        #expect(!h.downloader.setPriority(.high, receipt: c), "finished")
    }

    @Test("priority comes before fairness: an app with a transfer running still goes first with a higher priority")
    func priorityBeforeFairness() {
        let h = Harness(max: 4)
        h.get("running-A", app: "A")
        for i in 0..<3 { h.get("blocker\(i)", app: "B") }
        h.get("normal-C", app: "C")
        h.get("high-A", app: "A", priority: .high)
        h.fetcher.succeed(h.fetcher.transfer(for: "blocker0")!)
        #expect(h.fetcher.startedURLs.last == "high-A", "C runs nothing, A runs one, yet A's high goes first")
    }

    @Test("an app that marks everything very-high takes at most half the slots ahead of other apps' normal work")
    func raisedShareIsBounded() {
        let h = Harness(max: 4)
        for i in 0..<4 { h.get("blocker\(i)", app: "C") }
        for i in 0..<8 { h.get("hog\(i)", owner: ":1.2", app: "hog", priority: .veryHigh) }
        for i in 0..<8 { h.get("polite\(i)", owner: ":1.3", app: "polite") }
        for i in 0..<4 { h.fetcher.succeed(h.fetcher.transfer(for: "blocker\(i)")!) }
        let started = h.fetcher.startedURLs.dropFirst(4)
        #expect(started.filter { $0.hasPrefix("hog") }.count == 2, "half the slots, rounded up: \(started)")
        #expect(started.filter { $0.hasPrefix("polite") }.count == 2, "\(started)")
        #expect(Array(started.prefix(2)) == ["hog0", "hog1"], "within its share, very-high goes first")
    }

    @Test(
        "a slow transfer yields its slot to queued work and goes on; an app's running transfers are bounded while others wait"
    )
    func slowTransfersYield() {
        let h = Harness(max: 2)
        h.get("slow1", app: "hog")
        h.get("slow2", app: "hog")
        h.get("tiny", app: "polite")
        #expect(h.fetcher.startedURLs == ["slow1", "slow2"])
        #expect(!h.downloader.yieldSlot(999), "unknown transfer")
        let slow1 = h.fetcher.transfer(for: "slow1")!
        #expect(h.downloader.yieldSlot(slow1))
        #expect(!h.downloader.yieldSlot(slow1), "once")
        #expect(h.fetcher.startedURLs == ["slow1", "slow2", "tiny"], "the queued image starts in the slot given up")
        #expect(h.downloader.activeCount == 2 && h.downloader.yieldedCount == 1)
        #expect(
            !h.downloader.yieldSlot(h.fetcher.transfer(for: "slow2")!), "nothing queued: nothing to give the slot to")
        h.fetcher.succeed(h.fetcher.transfer(for: "tiny")!)
        h.fetcher.succeed(slow1)
        #expect(h.results["tiny"] == .ok && h.results["slow1"] == .ok, "the yielded transfer went on to the end")
        #expect(h.downloader.activeCount == 1 && h.downloader.yieldedCount == 0)
        // The hog's transfers all stall and yield: it may run 2 x 2 at most, then its queue waits,
        // and a newcomer's image takes a slot at once.
        for i in 0..<10 { h.get("q\(i)", app: "hog") }
        for _ in 0..<10 {
            for id in h.fetcher.running { h.downloader.yieldSlot(id) }
        }
        #expect(h.downloader.activeCount + h.downloader.yieldedCount == 4, "the hog's cap of running transfers")
        #expect(h.downloader.yieldedCount == 2, "no more yield while only the hog, at its cap, waits")
        h.get("late", app: "polite")
        #expect(h.fetcher.startedURLs.last != "late", "both slots are held")
        // The driver's next look at the slow ones: one yields, and the newcomer, not the hog, starts.
        for id in h.fetcher.running where h.downloader.yieldSlot(id) { break }
        #expect(h.fetcher.startedURLs.last == "late")
        #expect(h.downloader.activeCount + h.downloader.yieldedCount == 5)
    }

    @Test("the unscoped pool's processes are one app for the queue: forking wins no slot over another app")
    func poolIsOneAppInTheQueue() {
        let h = Harness(max: 2)
        for p in 0..<20 { h.get("sybil\(p)", app: "unscoped/pid:\(p)") }
        h.get("polite", app: "flatpak:org.example.App")
        // Two slots went to the pool's first two; the next slot that frees goes to the other app,
        // though twenty processes wait with nothing running each.
        h.fetcher.succeed(h.fetcher.transfer(for: "sybil0")!)
        #expect(h.fetcher.startedURLs.last == "polite")
    }

    @Test("a process of the unscoped pool that runs nothing starts, though the pool is at its cap of running transfers")
    func poolFloorIsPerProcess() {
        let h = Harness(max: 2)
        for i in 0..<10 { h.get("stall\(i)", app: "unscoped/pid:7") }
        for _ in 0..<10 {
            for id in h.fetcher.running { h.downloader.yieldSlot(id) }
        }
        #expect(h.downloader.activeCount + h.downloader.yieldedCount == 4, "the pool's cap of running transfers")
        h.get("tiny", app: "unscoped/pid:8")
        for id in h.fetcher.running where h.downloader.yieldSlot(id) { break }
        #expect(
            h.fetcher.startedURLs.last == "tiny",
            "another process of the pool, running nothing, is not held by pid 7's stalls")
        for id in h.fetcher.running { h.downloader.yieldSlot(id) }
        #expect(h.fetcher.startedURLs.filter { $0.hasPrefix("stall") }.count == 4, "pid 7 itself stays at the cap")
    }

    @Test("a cache hit answers at once, with no receipt and no transfer")
    func cacheHit() {
        let h = Harness()
        h.cache["u"] = [1]
        #expect(h.get("u") == "")
        #expect(h.fetcher.startedCount == 0)
        #expect(h.results.isEmpty)
    }

    @Test("requests for one URL merge into one transfer; every handler hears the outcome; stored once")
    func merged() {
        let h = Harness()
        h.get("u", owner: ":1.1", label: "a")
        h.get("u", owner: ":1.2", label: "b")
        #expect(h.fetcher.startedCount == 1)
        h.fetcher.succeed(h.fetcher.transfer(for: "u")!)
        #expect(h.results["a"] == .ok)
        #expect(h.results["b"] == .ok)
        #expect(h.stores == ["u"])
        #expect(h.get("u") == "", "now a cache hit")
    }

    @Test("cancelling one of two receipts fails only that one; the transfer goes on")
    func cancelOneOfTwo() {
        let h = Harness()
        let a = h.get("u", label: "a")
        h.get("u", label: "b")
        #expect(h.downloader.cancel(receipt: a))
        #expect(h.results["a"] == .failed(.cancelled))
        #expect(h.fetcher.cancelled.isEmpty)
        h.fetcher.succeed(h.fetcher.transfer(for: "u")!)
        #expect(h.results["b"] == .ok)
        #expect(h.downloader.cancel(receipt: a) == false, "a finished receipt cannot be cancelled")
    }

    @Test("cancelling the last receipt stops the transfer, and a late completion does not fill the cache")
    func cancelledTransferDoesNotFillCache() {
        let h = Harness()
        let r = h.get("u")
        let t = h.fetcher.transfer(for: "u")!
        h.downloader.cancel(receipt: r)
        #expect(h.fetcher.cancelled == [t])
        h.fetcher.deliverLate(t)
        #expect(h.stores.isEmpty)
        #expect(h.downloader.activeCount == 0)
    }

    @Test("download, cancel, download again with more URLs than the limit never runs more than the limit (#3469)")
    func noOverAdmission() {
        let h = Harness(max: 2)
        let receipts = (0..<4).map { h.get("u\($0)") }
        #expect(h.fetcher.running.count == 2)
        h.downloader.cancel(receipt: receipts[3])  // queued
        h.downloader.cancel(receipt: receipts[0])  // running: frees one slot, u2 starts
        for i in 4..<9 { h.get("u\(i)") }
        #expect(h.fetcher.running.count == 2)
        while let t = h.fetcher.running.first { h.fetcher.succeed(t) }
        #expect(h.fetcher.peakRunning == 2)
        #expect(Set(h.fetcher.startedURLs) == ["u0", "u1", "u2", "u4", "u5", "u6", "u7", "u8"])
        #expect(h.downloader.activeCount == 0 && h.downloader.queuedCount == 0)
    }

    @Test(
        "FIFO and LIFO order of the queue",
        arguments: [
            (ImageDownloader.Prioritization.fifo, ["a", "b", "c", "d"]),
            (.lifo, ["a", "d", "c", "b"]),
        ])
    func order(order: ImageDownloader.Prioritization, expected: [String]) {
        let h = Harness(max: 1, order: order)
        for u in ["a", "b", "c", "d"] { h.get(u) }
        while let t = h.fetcher.running.first { h.fetcher.succeed(t) }
        #expect(h.fetcher.startedURLs == expected)
    }

    @Test("a failure ends only its transfer; the queue goes on")
    func failureDoesNotStall() {
        let h = Harness(max: 1)
        h.get("a")
        h.get("b")
        h.fetcher.fail(h.fetcher.transfer(for: "a")!, .http, message: "404 Not Found")
        #expect(h.results["a"] == .failed(.failed(NetActivityError(.http, "404 Not Found"))))
        #expect(h.fetcher.transfer(for: "b") != nil)
        #expect(h.downloader.activeCount == 1)
    }

    @Test("reload bypasses the cache; a reload overtaking a running plain transfer wins the cache")
    func reload() {
        let h = Harness()
        h.cache["u"] = [0]
        h.get("u", reload: true, label: "fresh")
        #expect(h.fetcher.started.last?.reload == true)
        h.fetcher.succeed(h.fetcher.transfer(for: "u")!, bytes: [1])
        #expect(h.cache["u"] == [1])

        h.cache["v"] = nil
        h.get("v", label: "plain")
        let old = h.fetcher.transfer(for: "v")!
        h.get("v", reload: true, label: "reload")
        let new = h.fetcher.transfer(for: "v")!
        #expect(new != old && h.fetcher.startedCount == 3)
        h.fetcher.succeed(new, bytes: [2])
        h.fetcher.succeed(old, bytes: [1])  // older bytes, later: must not clobber
        #expect(h.cache["v"] == [2])
        #expect(h.results["plain"] == .ok && h.results["reload"] == .ok)
    }

    @Test("a queued transfer becomes a reload when a reload asks for it")
    func reloadUpgradesQueued() {
        let h = Harness(max: 1)
        h.get("busy")
        h.get("u")
        h.get("u", reload: true)
        h.fetcher.succeed(h.fetcher.transfer(for: "busy")!)
        #expect(h.fetcher.started.last?.url == "u")
        #expect(h.fetcher.started.last?.reload == true)
        #expect(h.fetcher.startedCount == 2)
    }

    @Test("a completion for an older transfer of the same URL never touches the newer one")
    func staleCompletion() {
        let h = Harness()
        let first = h.get("u", label: "first")
        let t1 = h.fetcher.transfer(for: "u")!
        h.downloader.cancel(receipt: first)
        h.get("u", label: "second")
        let t2 = h.fetcher.transfer(for: "u")!
        h.fetcher.progress(t1, received: 5, expected: 10)
        h.fetcher.deliverLate(t1)
        #expect(h.stores.isEmpty)
        #expect(h.results["second"] == nil)
        #expect(h.downloader.activeCount == 1)
        h.fetcher.succeed(t2)
        #expect(h.results["second"] == .ok)
        #expect(h.stores == ["u"])
    }

    @Test("an owner leaving cancels its receipts silently, and the transfer stops when none is left")
    func ownerVanished() {
        let h = Harness()
        h.get("shared", owner: ":1.1", label: "mine")
        h.get("shared", owner: ":1.2", label: "theirs")
        h.get("alone", owner: ":1.1", label: "alone")
        h.downloader.ownerVanished(":1.1")
        #expect(h.results.isEmpty)
        #expect(h.fetcher.cancelled == [h.fetcher.started.first { $0.url == "alone" }!.transfer])
        h.fetcher.succeed(h.fetcher.transfer(for: "shared")!)
        #expect(h.results["theirs"] == .ok)
        #expect(h.results["mine"] == nil)
    }

    @Test("raising the limit starts queued transfers at once")
    func raiseLimit() {
        let h = Harness(max: 1)
        for u in ["a", "b", "c"] { h.get(u) }
        h.downloader.maximumActiveDownloads = 3
        #expect(h.fetcher.running.count == 3)
    }

    @Test("when the overtaking reload fails, the older transfer's bytes may fill the cache")
    func overtakingReloadFails() {
        let h = Harness()
        h.get("v", label: "plain")
        let old = h.fetcher.transfer(for: "v")!
        h.get("v", reload: true, label: "reload")
        let new = h.fetcher.transfer(for: "v")!
        h.fetcher.fail(new)
        h.fetcher.succeed(old, bytes: [1])
        #expect(h.cache["v"] == [1])
        #expect(h.results["plain"] == .ok)
        #expect(h.results["reload"] == .failed(.failed(NetActivityError(.http, "404 Not Found"))))
    }

    @Test(
        "a plain download that succeeds while another app's reload runs gets its own bytes, never the reload's failure")
    func plainNeverFailedByReload() {
        let h = Harness()
        h.get("w", owner: ":1.1", label: "plain")
        let old = h.fetcher.transfer(for: "w")!
        h.get("w", owner: ":1.2", reload: true, label: "reload")
        let new = h.fetcher.transfer(for: "w")!
        h.fetcher.succeed(old, bytes: [1])
        #expect(h.results["plain"] == .ok, "answered at once with its own 200")
        #expect(h.cache["w"] == [1])
        #expect(h.results["reload"] == nil)
        h.fetcher.fail(new, .http, message: "HTTP 500 for w")
        #expect(h.results["plain"] == .ok)
        #expect(h.results["reload"] == .failed(.failed(NetActivityError(.http, "HTTP 500 for w"))))
        #expect(h.cache["w"] == [1], "the failed reload took nothing away")
    }

    @Test("a plain download that fails while a reload runs waits for the reload, its second chance")
    func failedPlainJoinsReload() {
        let h = Harness()
        h.get("x", label: "plain")
        let old = h.fetcher.transfer(for: "x")!
        h.get("x", reload: true, label: "reload")
        let new = h.fetcher.transfer(for: "x")!
        h.fetcher.fail(old)
        #expect(h.results["plain"] == nil)
        h.fetcher.succeed(new, bytes: [3])
        #expect(h.results["plain"] == .ok && h.results["reload"] == .ok)
        #expect(h.cache["x"] == [3])
    }

    @Test("thousands of queued receipts of one owner leave at once; the queue keeps its order and its count")
    func abandonedReceiptsLeave() {
        for order in [ImageDownloader.Prioritization.fifo, .lifo] {
            let h = Harness(max: 1, order: order)
            h.get("running", owner: ":1.9")
            h.get("before", owner: ":1.8")
            for i in 0..<5000 { h.get("hostile-\(i)", owner: ":1.7") }
            h.get("after", owner: ":1.8")
            #expect(h.downloader.queuedCount == 5002)
            h.downloader.ownerVanished(":1.7")
            #expect(h.downloader.queuedCount == 2)
            #expect(h.fetcher.cancelled.isEmpty, "queued transfers were never started, so none is cancelled")
            h.fetcher.succeed(h.fetcher.transfer(for: "running")!)
            let next = order == .fifo ? "before" : "after"
            #expect(h.fetcher.started.last?.url == next)
            h.fetcher.succeed(h.fetcher.transfer(for: next)!)
            #expect(h.fetcher.started.last?.url == (order == .fifo ? "after" : "before"))
            #expect(h.downloader.queuedCount == 0)
            #expect(h.fetcher.startedCount == 3, "no abandoned transfer ever started")
            #expect(h.downloader.owner(of: "r3") == nil)
        }
    }

    @Test("the next transfer comes from the app with the fewest running: one app's queue cannot starve another's")
    func fairAcrossApps() {
        let h = Harness(max: 2)
        for i in 1...12 { h.get("a\(i)", owner: ":1.1", app: "greedy") }
        h.get("b1", owner: ":1.2", app: "small")
        #expect(h.fetcher.running.count == 2)
        h.fetcher.succeed(h.fetcher.transfer(for: "a1")!)
        #expect(h.fetcher.started.last?.url == "b1", "the app with nothing running goes first, not a3")
        h.fetcher.succeed(h.fetcher.transfer(for: "a2")!)
        #expect(h.fetcher.started.last?.url == "a3", "then FIFO within the greedy app")
        h.fetcher.succeed(h.fetcher.transfer(for: "b1")!)
        #expect(h.fetcher.started.last?.url == "a4")
    }

    @Test("a merged transfer runs for every app that waits for it")
    func mergedBelongsToAllApps() {
        let h = Harness(max: 2)
        h.get("shared", owner: ":1.1", app: "A")
        h.get("shared", owner: ":1.2", app: "B")
        h.get("a1", owner: ":1.1", app: "A")
        h.get("b1", owner: ":1.2", app: "B")
        h.get("c1", owner: ":1.3", app: "C")
        h.fetcher.succeed(h.fetcher.transfer(for: "a1")!)
        #expect(h.fetcher.started.last?.url == "c1", "A and B each have the shared transfer running; C has none")
    }

    @Test("LIFO within an app, fewest running across apps")
    func fairLIFO() {
        let h = Harness(max: 1, order: .lifo)
        h.get("run", owner: ":1.1", app: "A")
        for i in 1...3 { h.get("a\(i)", owner: ":1.1", app: "A") }
        h.get("b1", owner: ":1.2", app: "B")
        h.fetcher.succeed(h.fetcher.transfer(for: "run")!)
        #expect(h.fetcher.started.last?.url == "b1", "equal running (none): the newest next transfer")
        h.fetcher.succeed(h.fetcher.transfer(for: "b1")!)
        #expect(h.fetcher.started.last?.url == "a3")
    }
}
