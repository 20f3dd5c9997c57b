// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

@Suite("The fair transfer queue: priority, then the app running fewest, then order")
struct FairTransferQueueTests {
    typealias Key = FairTransferQueue.Key

    /// A queue and the set of live ids, driven as the downloader drives it: `take` starts the next
    /// transfer (it stops being live: its entries are dead from then on).
    struct Driver {
        var queue: FairTransferQueue
        /// Live queued transfers: id -> (apps waiting, priority).
        var live: [UInt64: (apps: Set<String>, priority: FairTransferQueue.Priority)] = [:]
        var running: [String: Int] = [:]
        var limits = FairTransferQueue.Limits(maximumRunningPerApp: 8, raisedShare: 2)

        init(_ order: FairTransferQueue.Prioritization = .fifo) { queue = FairTransferQueue(prioritization: order) }

        mutating func add(_ id: UInt64, _ apps: Set<String>, _ priority: FairTransferQueue.Priority = .normal) {
            live[id] = (apps, priority)
            queue.enqueue(id, apps: apps, priority: priority)
        }

        mutating func take() -> UInt64? {
            var apps: [Substring: Int] = [:]
            for (leaf, n) in running { apps[ClientIdentity.app(ofLeaf: leaf), default: 0] += n }
            let live = self.live
            let id = queue.next(running: running, runningApps: apps, limits: limits) { id, key in
                guard let t = live[id] else { return false }
                return t.priority == key.priority && t.apps.contains(key.app)
            }
            if let id, let t = self.live.removeValue(forKey: id) {
                for app in t.apps { running[app, default: 0] += 1 }
            }
            return id
        }

        mutating func takeAll() -> [UInt64] {
            var out: [UInt64] = []
            while let id = take() { out.append(id) }
            return out
        }
    }

    @Test("one app, one priority: AFNetworking's FIFO, or LIFO")
    func order() {
        var fifo = Driver(.fifo)
        var lifo = Driver(.lifo)
        fifo.limits.maximumRunningPerApp = .max
        lifo.limits.maximumRunningPerApp = .max
        for id: UInt64 in 1...5 {
            fifo.add(id, ["app:a"])
            lifo.add(id, ["app:a"])
        }
        #expect(fifo.takeAll() == [1, 2, 3, 4, 5])
        #expect(lifo.takeAll() == [5, 4, 3, 2, 1])
    }

    @Test("the highest priority first, whatever the app or the order")
    func priority() {
        var d = Driver()
        d.add(1, ["app:a"], .low)
        d.add(2, ["app:b"], .normal)
        d.add(3, ["app:a"], .veryHigh)
        d.add(4, ["app:c"], .veryLow)
        #expect(d.takeAll() == [3, 2, 1, 4])
    }

    @Test("the next comes from the app running fewest: one app's hundred queued never starve another's one")
    func fewestFirst() {
        var d = Driver()
        for id: UInt64 in 1...100 { d.add(id, ["app:hog"]) }
        d.add(101, ["app:polite"])
        #expect(d.take() == 1)
        #expect(d.take() == 101, "the hog runs one, the polite app none: the polite app's turn")
        #expect(d.take() == 2)
    }

    @Test("the unscoped pool's processes count as one app first, then among themselves")
    func unscopedPool() {
        var d = Driver()
        d.add(1, ["unscoped/pid:10"])
        d.add(2, ["unscoped/pid:11"])
        d.add(3, ["app:other"])
        #expect(d.take() == 1)
        #expect(d.take() == 3, "the pool runs one already: the other app goes before the pool's second process")
        #expect(d.take() == 2)
    }

    @Test("an app at its running cap waits while others go, but a process of the pool that runs nothing may start")
    func cap() {
        var d = Driver()
        d.limits.maximumRunningPerApp = 2
        d.running = ["app:a": 2, "unscoped/pid:1": 2]
        d.add(1, ["app:a"])
        d.add(2, ["unscoped/pid:2"])
        #expect(d.take() == 2, "the pool's floor is per live process")
        #expect(d.take() == nil, "app:a is at its cap")
    }

    @Test("a raised priority counts only within the app's raised share; past it, it competes as normal")
    func raisedShare() {
        var d = Driver()
        d.limits.raisedShare = 1
        d.running = ["app:greedy": 1]
        d.add(1, ["app:greedy"], .veryHigh)
        d.add(2, ["app:other"], .normal)
        #expect(d.take() == 2, "at normal, the app running fewest goes first")
        #expect(d.take() == 1)
    }

    @Test("held very-low work is skipped and counted as waiting; the hold lifted, it starts")
    func holdingVeryLow() {
        var d = Driver()
        d.limits.holdingVeryLow = true
        d.add(1, ["app:a"], .veryLow)
        d.add(2, ["app:b"], .veryLow)
        let live = d.live
        #expect(d.queue.waiting(at: .veryLow) { id, _ in live[id] != nil } == [1, 2])
        #expect(d.take() == nil)
        d.limits.holdingVeryLow = false
        #expect(d.takeAll() == [1, 2])
    }

    @Test("a merged transfer waits in each of its apps' queues and starts once")
    func merged() {
        var d = Driver()
        d.add(1, ["app:a", "app:b"])
        d.add(2, ["app:b"])
        #expect(d.takeAll() == [1, 2])
        #expect(d.queue.queueCount == 0, "dead entries went with the queues they emptied")
    }

    @Test(
        "an entry that died is skipped; the transfer may enter that queue again, and `first` puts it where the queue is taken next"
    )
    func deadEntriesAndFirst() {
        var d = Driver()
        for id: UInt64 in 1...3 { d.add(id, ["app:a"]) }
        // 2 is lifted to high (its normal entry dies), then drops back: it finds its old place.
        d.live[2] = (["app:a"], .high)
        d.queue.enqueue(2, apps: ["app:a"], priority: .high)
        d.live[2] = (["app:a"], .normal)
        #expect(d.take() == 1)
        #expect(d.take() == 2)
        // A transfer paused back into the queue goes first (FIFO: at the head).
        d.live[9] = (["app:a"], .normal)
        d.queue.enqueue(9, apps: ["app:a"], priority: .normal, first: true)
        #expect(d.takeAll() == [9, 3])
    }

    @Test("thousands of dead entries are skipped and compacted, and the order holds")
    func compaction() {
        var d = Driver()
        d.limits.maximumRunningPerApp = .max
        for id: UInt64 in 1...2000 { d.add(id, ["app:a"]) }
        for id: UInt64 in 1...1500 where id % 3 != 0 { d.live[id] = nil }  // left early
        var expected = (1...1500).filter { $0 % 3 == 0 }.map(UInt64.init)
        expected += (1501...2000).map(UInt64.init)
        #expect(d.takeAll() == expected)
        for id in expected { d.queue.remove(id) }
        #expect(d.queue.queueCount == 0)
    }
}
