// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

@Suite("Prefetch queue")
struct PrefetchQueueTests {
    @Test("Apps take turns, one URL each; within an app, jobs and URLs in order")
    func turns() {
        var q = PrefetchQueue()
        let a1 = q.add(urls: ["a1", "a2", "a3"], owner: ":1.1", app: "A", started: 1)
        _ = q.add(urls: ["a4"], owner: ":1.1", app: "A", started: 2)
        _ = q.add(urls: ["b1", "b2"], owner: ":1.2", app: "B", started: 3)
        #expect(q.waitingCount == 6)
        var order: [String] = []
        while let (_, url, _) = q.next() { order.append(url) }
        #expect(order == ["a1", "b1", "a2", "b2", "a3", "a4"])
        #expect(q.waitingCount == 0)
        #expect(q.job(a1)?.waiting == 0)
    }

    @Test("A job ends when its last URL ends, counting stored and failed, not cancelled")
    func ending() {
        var q = PrefetchQueue()
        let r = q.add(urls: ["u1", "u2", "u3"], owner: ":1.1", app: "A", started: 1)
        while let (_, url, _) = q.next() { q.started(r, url: url, handle: "h-" + url) }
        #expect(q.ended(r, url: "u1", stored: true) == nil)
        #expect(q.ended(r, url: "u2", stored: nil) == nil)
        let done = q.ended(r, url: "u3", stored: false)
        #expect(done?.stored == 1 && done?.failed == 1)
        #expect(q.isEmpty && q.receipts(of: ":1.1").isEmpty)
    }

    @Test("Removing URLs: waiting ones go, running ones are handed back; removing a job whole")
    func removing() {
        var q = PrefetchQueue()
        let r = q.add(urls: ["u1", "u2", "u3", "u4"], owner: ":1.1", app: "A", started: 1)
        _ = q.next()
        q.started(r, url: "u1", handle: "h1")
        let part = q.remove(["u1", "u3"], from: r)
        #expect(part.waiting == 1 && part.running.map(\.handle) == ["h1"] && part.finished == nil)
        #expect(q.waitingCount == 2)
        #expect(q.next()?.url == "u2")
        let whole = q.remove(r)
        #expect(whole?.waitingURLs == ["u4"] && whole?.job.running == ["u1": "h1"])
        #expect(q.isEmpty && q.waitingCount == 0 && q.next() == nil)
        // An app that comes back after its queue emptied gets one turn, not two.
        _ = q.add(urls: ["a1", "a2"], owner: ":1.1", app: "A", started: 2)
        _ = q.add(urls: ["b1", "b2"], owner: ":1.2", app: "B", started: 2)
        #expect([q.next()?.url, q.next()?.url, q.next()?.url] == ["a1", "b1", "a2"])
    }
}
