// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import NetActivityTesting
import Testing

@Suite("Disk index: what makes room for what")
struct DiskIndexTests {
    @Test("Plain LRU with one owner; an entry larger than the capacity does not fit")
    func lru() {
        var index = DiskIndex(capacity: 30)
        for (i, name) in ["a", "b", "c"].enumerated() {
            #expect(index.makeRoom(for: name, size: 10, owner: "app").fits)
            index.insert(name, size: 10, owner: "app", at: Double(i))
        }
        _ = index.touch("a", at: 5)
        let room = index.makeRoom(for: "d", size: 10, owner: "app")
        #expect(room.taken == ["b"] && room.fits)
        #expect(!index.makeRoom(for: "e", size: 31, owner: "app").fits)
    }

    @Test("Prefetched entries nobody used go first; a use makes one an entry like any other")
    func prefetchedGoFirst() {
        var index = DiskIndex(capacity: 40)
        index.insert("old", size: 10, owner: "app", at: 1)
        index.insert("p1", size: 10, owner: "app", at: 2, prefetched: true)
        index.insert("p2", size: 10, owner: "app", at: 3, prefetched: true)
        index.insert("new", size: 10, owner: "app", at: 4)
        _ = index.touch("p2", at: 5)
        let x = index.makeRoom(for: "x", size: 10, owner: "app")
        #expect(x.taken == ["p1"])
        index.insert("x", size: 10, owner: "app", at: 6)
        let y = index.makeRoom(for: "y", size: 10, owner: "app")
        #expect(y.taken == ["old"])
        #expect(!index.isUnusedPrefetch("p2"))
    }

    @Test("A prefetch takes only what was last used before it started, else it is refused")
    func prefetchNeverTakesRecentUses() {
        var index = DiskIndex(capacity: 30)
        index.insert("a", size: 10, owner: "app", at: 1)
        index.insert("b", size: 10, owner: "app", at: 2)
        index.insert("c", size: 10, owner: "app", at: 3)
        _ = index.touch("a", at: 11)  // used after the prefetch (started at 10) began
        let first = index.makeRoom(for: "p1", size: 10, owner: "app", prefetchStarted: 10)
        #expect(first.taken == ["b"] && first.fits)
        index.insert("p1", size: 10, owner: "app", at: 12, prefetched: true)
        let second = index.makeRoom(for: "p2", size: 10, owner: "app", prefetchStarted: 10)
        #expect(second.taken == ["c"] && second.fits)
        index.insert("p2", size: 10, owner: "app", at: 13, prefetched: true)
        // Left: a (used at 11) and its own p1, p2: nothing it may take.
        let third = index.makeRoom(for: "p3", size: 10, owner: "app", prefetchStarted: 10)
        #expect(third.taken.isEmpty && !third.fits)
        #expect(index.contains("a") && index.contains("p1") && index.contains("p2"))
        // A later prefetch takes the earlier one's unused images first.
        let later = index.makeRoom(for: "q", size: 10, owner: "app", prefetchStarted: 20)
        #expect(later.taken == ["p1"])
    }

    /// The model: each entry's size, last use and whether it is an unused prefetch.
    struct Model {
        var entries: [String: (size: UInt64, used: Double, unusedPrefetch: Bool)] = [:]
        var usage: UInt64 { entries.values.reduce(0) { $0 + $1.size } }
    }

    @Test(
        "Random traffic with prefetches of 500: no prefetch takes an entry used since it started",
        arguments: [1, 2, 3, 4, 5] as [UInt64])
    func property(seed: UInt64) {
        var random = SplitMix(seed: seed)
        let capacity: UInt64 = 2000
        var index = DiskIndex(capacity: capacity)
        var model = Model()
        var now = 0.0
        var prefetches: [(started: Double, left: Int)] = []
        var nextName = 0
        var prefetchedTaken = 0
        func write(size: UInt64, owner: String, prefetch: Double?) {
            now += 1
            nextName += 1
            let name = "e\(nextName)"
            let hadUnused = model.entries.values.contains { e in
                e.unusedPrefetch && (prefetch.map { e.used < $0 } ?? true)
            }
            let room = index.makeRoom(for: name, size: size, owner: owner, prefetchStarted: prefetch)
            let firstWasUnused = room.taken.first.map { model.entries[$0]?.unusedPrefetch == true } ?? true
            for taken in room.taken {
                guard let entry = model.entries.removeValue(forKey: taken) else {
                    Issue.record("seed \(seed): took \(taken), which the model does not hold")
                    continue
                }
                if let prefetch {
                    #expect(
                        entry.used < prefetch,
                        "seed \(seed): a prefetch took \(taken), used at \(entry.used) ≥ its start \(prefetch)")
                }
                if entry.unusedPrefetch { prefetchedTaken += 1 }
            }
            if hadUnused, let first = room.taken.first {
                #expect(
                    firstWasUnused,
                    "seed \(seed): room was made from \(first) while unused prefetched images were there")
            }
            if room.fits {
                index.insert(name, size: size, owner: owner, at: now, prefetched: prefetch != nil)
                model.entries[name] = (size, now, prefetch != nil)
            }
            #expect(index.usage == model.usage && index.count == model.entries.count)
            #expect(index.usage <= capacity)
        }
        for _ in 0..<6000 {
            switch random.next(below: 10) {
            case 0...2:
                write(size: UInt64(1 + random.next(below: 30)), owner: "app", prefetch: nil)
            case 3...4:
                // A use: of a random entry (found on disk or served from memory).
                guard !model.entries.isEmpty else { continue }
                let names = model.entries.keys.sorted()
                let name = names[random.next(below: names.count)]
                now += 1
                let touched = index.touch(name, at: now)
                #expect(touched)
                model.entries[name]!.used = now
                model.entries[name]!.unusedPrefetch = false
            case 5:
                if prefetches.count < 3 {
                    now += 1
                    prefetches.append((now, 500))
                }
            default:
                guard !prefetches.isEmpty else { continue }
                let i = random.next(below: prefetches.count)
                write(size: UInt64(1 + random.next(below: 30)), owner: "app", prefetch: prefetches[i].started)
                prefetches[i].left -= 1
                if prefetches[i].left == 0 { prefetches.remove(at: i) }
            }
        }
        #expect(prefetchedTaken > 0, "seed \(seed): the traffic never made room from a prefetch")
    }
}
