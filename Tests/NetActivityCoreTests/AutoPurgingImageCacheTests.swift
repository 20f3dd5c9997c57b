// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import NetActivityTesting
import Testing

/// AFNetworking's AFAutoPurgingImageCacheTests, ported (the image is a class instance, so
/// "the same image back" is identity), plus what AFNetworking got wrong.
@Suite("Auto-purging image cache")
struct AutoPurgingImageCacheTests {
    final class Image {
        let bytes: UInt64
        init(_ bytes: UInt64 = 13600) { self.bytes = bytes }
    }

    typealias Cache = AutoPurgingImageCache<Image>
    let image = Image()
    let url = "http://test.com/image"

    func cache(_ capacity: UInt64 = 100 * 1024 * 1024, _ preferred: UInt64 = 60 * 1024 * 1024) -> Cache {
        Cache(memoryCapacity: capacity, preferredMemoryUsageAfterPurge: preferred)
    }

    func add(_ c: inout Cache, _ image: Image, _ key: String) throws {
        try c.add(image, cost: image.bytes, for: key)
    }

    @Test("the same image comes back for its identifier")
    func identifier() throws {
        var c = cache()
        try add(&c, image, "logo")
        #expect(c.image(for: "logo") === image)
    }

    @Test("the same image comes back for a request, with and without an additional identifier")
    func request() throws {
        var c = cache()
        try add(&c, image, ImageRequestKey.make(url: url, additional: ""))
        try add(&c, image, ImageRequestKey.make(url: url, additional: "filter"))
        #expect(c.image(for: ImageRequestKey.make(url: url, additional: "")) === image)
        #expect(c.image(for: ImageRequestKey.make(url: url, additional: "filter")) === image)
    }

    @Test("no image for the request without the additional identifier, or for another URL")
    func requestMisses() throws {
        var c = cache()
        try add(&c, image, ImageRequestKey.make(url: url, additional: "filter"))
        #expect(c.image(for: ImageRequestKey.make(url: url, additional: "")) == nil)
        #expect(c.image(for: ImageRequestKey.make(url: "http://test.com/differentImage", additional: "")) == nil)
    }

    @Test("adding again replaces the image and its cost")
    func replace() throws {
        var c = cache()
        try add(&c, image, url)
        let newer = Image(500)
        let replaced = try c.add(newer, cost: newer.bytes, for: url)
        #expect(c.image(for: url) === newer)
        #expect(replaced.count == 1 && replaced[0] === image)
        #expect(c.memoryUsage == 500)
        #expect(c.count == 1)
    }

    @Test("removing reports true once, then false; the image is gone", arguments: ["", "filter"])
    func removeTwice(additional: String) throws {
        var c = cache()
        let key = ImageRequestKey.make(url: url, additional: additional)
        try add(&c, image, key)
        #expect(c.remove(key) != nil)
        #expect(c.remove(key) == nil)
        #expect(c.image(for: key) == nil)
    }

    @Test("a request is not removed with a missing or different additional identifier")
    func removeWrongIdentifier() throws {
        var c = cache()
        try add(&c, image, ImageRequestKey.make(url: url, additional: "filter"))
        #expect(c.remove(ImageRequestKey.make(url: url, additional: "")) == nil)
        #expect(c.remove(ImageRequestKey.make(url: url, additional: "nofilter")) == nil)
        #expect(c.image(for: ImageRequestKey.make(url: url, additional: "filter")) != nil)
    }

    @Test("memory usage rises by the cost on add and falls on remove")
    func usage() throws {
        var c = cache()
        #expect(c.memoryUsage == 0)
        try add(&c, image, "logo")
        #expect(c.memoryUsage == 13600)
        _ = c.remove("logo")
        #expect(c.memoryUsage == 0)
    }

    @Test("10 images fill the cache; the 11th purges to exactly 6")
    func purgeAtCapacity() throws {
        var c = cache(10 * 13600, 6 * 13600)
        for index in 1...11 {
            try add(&c, Image(), "image-\(index)")
            #expect(c.memoryUsage == (index <= 10 ? UInt64(index) : 6) * 13600, "after image \(index)")
        }
        #expect(c.statistics.evictions == 5)
    }

    @Test("a read refreshes recency: the purge keeps image 0 and 6...10")
    func lruAfterRead() throws {
        var c = cache(10 * 13600, 6 * 13600)
        for index in 0..<10 { try add(&c, Image(), "image-\(index)") }
        #expect(c.image(for: "image-0") != nil)
        let before = c.memoryUsage
        try add(&c, Image(), "image-10")
        #expect(c.memoryUsage < before)
        for index in 0...10 {
            #expect((c.peek("image-\(index)") != nil) == (index == 0 || index >= 6), "image-\(index)")
        }
    }

    @Test("images added within the same instant still purge in insertion order (no wall-clock ties)")
    func deterministicOrder() throws {
        var c = cache(4, 2)
        for key in ["a", "b", "c", "d"] { try c.add(Image(1), cost: 1, for: key) }
        _ = c.image(for: "b")
        #expect(c.keysByRecency == ["b", "d", "c", "a"])
        try c.add(Image(1), cost: 1, for: "e")
        #expect(c.keysByRecency == ["e", "b"])
    }

    @Test("request keys: (url, \"\") is the url; different pairs never share a key")
    func requestKeys() {
        #expect(ImageRequestKey.make(url: "http://a/x", additional: "") == "http://a/x")
        let pairs = [("u", "rl"), ("ur", "l"), ("url", ""), ("u", ""), ("", "url"), ("url", "\u{0}")]
        let keys = pairs.map { ImageRequestKey.make(url: $0.0, additional: $0.1) }
        #expect(Set(keys).count == pairs.count, "AFNetworking's \"u\"+\"rl\" == \"ur\"+\"l\" must not happen")
    }

    @Test("too large for the capacity is refused; the watermarks are validated; a shrink purges at once")
    func limits() throws {
        var c = cache(1000, 600)
        #expect(throws: Cache.Refusal.tooLarge(cost: 1001, capacity: 1000)) {
            try c.add(Image(1001), cost: 1001, for: "big")
        }
        #expect(throws: Cache.Refusal.preferredAboveCapacity(preferred: 700, capacity: 500)) {
            try c.setLimits(capacity: 500, preferred: 700)
        }
        for i in 0..<10 { try c.add(Image(100), cost: 100, for: "i\(i)") }
        #expect(c.memoryUsage == 1000)
        let evicted = try c.setLimits(capacity: 500, preferred: 300)
        #expect(evicted.count == 7)
        #expect(c.memoryUsage == 300)
        #expect(c.keysByRecency == ["i9", "i8", "i7"])
    }

    @Test("the image just added is never evicted by its own insertion")
    func newestSurvives() throws {
        var c = cache(1000, 100)
        try c.add(Image(400), cost: 400, for: "old")
        try c.add(Image(900), cost: 900, for: "new")
        #expect(c.keysByRecency == ["new"])
        #expect(c.memoryUsage == 900)
    }

    @Test("memory pressure: moderate trims to the preferred usage, critical empties; statistics say so")
    func pressure() throws {
        var c = cache(1000, 500)
        for i in 0..<9 { try c.add(Image(100), cost: 100, for: "i\(i)") }
        #expect(c.trim(critical: false).count == 4)
        #expect(c.memoryUsage == 500)
        #expect(c.trim(critical: true).count == 5)
        #expect(c.memoryUsage == 0)
        let s = c.statistics
        #expect((s.pressureModerate, s.pressureCritical, s.pressureEvictions, s.pressureBytesFreed) == (1, 1, 9, 900))
    }

    @Test("hits, misses and insertions are counted")
    func statistics() throws {
        var c = cache()
        try add(&c, image, "a")
        _ = c.image(for: "a")
        _ = c.image(for: "b")
        _ = c.peek("a")
        #expect((c.statistics.hits, c.statistics.misses, c.statistics.insertions) == (1, 1, 1))
    }
}

@Suite("LRU list")
struct LRUCacheTests {
    @Test("removal from the middle, the ends and reuse of slots keep the order")
    func order() {
        var lru = LRUCache<Int, Int>()
        for i in 0..<6 { lru.set(i, cost: 1, for: i) }
        #expect(lru.remove(3)?.value == 3)
        #expect(lru.remove(5)?.value == 5)
        #expect(lru.removeOldest()?.key == 0)
        lru.set(7, cost: 2, for: 7)
        _ = lru.value(for: 1)
        #expect(lru.keysByRecency == [1, 7, 4, 2])
        #expect(lru.totalCost == 5)
        #expect(lru.count == 4)
    }

    @Test("50,000 random operations agree with a plain reference model (table growth, deletion shifts, slot reuse)")
    func againstModel() {
        var lru = LRUCache<String, Int>()
        var model: [(key: String, value: Int)] = []  // most recent first
        var rng = SplitMix(seed: 7)
        for step in 0..<50_000 {
            // A key space that grows then shrinks, so the table grows and deletions cluster.
            let space = UInt64(step < 25_000 ? 2 + step / 50 : 2 + (50_000 - step) / 50)
            let key = "k\(rng.next() % space)"
            switch rng.next() % 5 {
            case 0, 1:
                let replaced = lru.set(step, cost: 1, for: key)
                let old = model.firstIndex { $0.key == key }
                #expect(replaced == old.map { model[$0].value })
                if let old { model.remove(at: old) }
                model.insert((key, step), at: 0)
            case 2:
                let got = lru.value(for: key)
                let i = model.firstIndex { $0.key == key }
                #expect(got == i.map { model[$0].value })
                if let i { model.insert(model.remove(at: i), at: 0) }
            case 3:
                let removed = lru.remove(key)?.value
                let i = model.firstIndex { $0.key == key }
                #expect(removed == i.map { model[$0].value })
                if let i { model.remove(at: i) }
            default:
                let oldest = lru.removeOldest()
                #expect(oldest?.key == model.last?.key && oldest?.value == model.last?.value)
                if !model.isEmpty { model.removeLast() }
            }
            if step % 1000 == 0 {
                #expect(lru.keysByRecency == model.map(\.key))
                #expect(lru.count == model.count && lru.totalCost == UInt64(model.count))
            }
        }
        for (key, value) in model { #expect(lru.peek(key) == value) }
    }

    @Test(
        "fair eviction: the app above its share loses first, and only it; an image that fits only at others' cost is refused"
    )
    func fairEviction() throws {
        var cache = AutoPurgingImageCache<Int>(memoryCapacity: 100, preferredMemoryUsageAfterPurge: 60)
        for i in 0..<40 { _ = try cache.add(i, cost: 1, for: "small\(i)", owner: "victim") }
        _ = try cache.add(100, cost: 45, for: "big1", owner: "greedy")
        // 130 > 100: the greedy app (90, share 50) loses its own least recent image, although the
        // victim's images are older; then nobody is above its share, and the purge stops at 85
        // (the preferred 60 is a wish; the victim, within its share, is never evicted for another).
        let evicted = try cache.add(101, cost: 45, for: "big2", owner: "greedy")
        #expect(evicted == [100])
        #expect(cache.usageByOwner == ["victim": 40, "greedy": 45])
        // Another 64: room could only come from the victim (40 within its share of 50, and 40 + 64 >
        // 100): refused before anything is evicted.
        #expect(throws: AutoPurgingImageCache<Int>.Refusal.overShare(owner: "greedy", usage: 109, share: 50)) {
            try cache.add(102, cost: 64, for: "big3", owner: "greedy")
        }
        #expect(cache.usageByOwner == ["victim": 40, "greedy": 45])
        #expect(cache.peek("big2") == 101 && cache.peek("big3") == nil)
        #expect(cache.memoryUsage <= cache.memoryCapacity)
    }

    @Test("an unscoped pool's processes share one app's share; the floor holds per process")
    func fairEvictionInThePool() throws {
        var cache = AutoPurgingImageCache<Int>(memoryCapacity: 120, preferredMemoryUsageAfterPurge: 60)
        for i in 0..<20 { _ = try cache.add(i, cost: 1, for: "polite\(i)", owner: "unscoped/pid:1") }
        for i in 0..<20 { _ = try cache.add(i, cost: 1, for: "app\(i)", owner: "app:photos") }
        // 100 forked processes of one hog: their share is the pool's half, divided among them.
        var refused = 0
        for p in 2..<102 {
            for i in 0..<3 {
                do { _ = try cache.add(i, cost: 1, for: "hog\(p)-\(i)", owner: "unscoped/pid:\(p)") } catch {
                    refused += 1
                }
            }
        }
        #expect((0..<20).allSatisfy { cache.peek("app\($0)") != nil }, "the app within its share kept all its images")
        #expect(cache.memoryUsage <= 120)
        // The pool holds the rest (forking never gave it more than what the app left free), and
        // its processes were trimmed to equal shares: no process holds more than any other by 2.
        let pool = cache.usageByOwner.filter { $0.key.hasPrefix("unscoped/") }
        #expect(pool.values.reduce(0, +) <= 100)
        #expect(pool.values.max()! - pool.values.min()! <= 2)
        #expect(refused == 0)
    }

    @Test("a purge of more than a slice stops there and goes on with continuePurge, for one owner or many")
    func purgeInSlices() throws {
        for owners in [1, 400] {
            let n = 3 * AutoPurgingImageCache<Int>.purgeSlice + 100
            var cache = AutoPurgingImageCache<Int>(memoryCapacity: UInt64(n), preferredMemoryUsageAfterPurge: 0)
            for i in 0..<n { _ = try cache.add(i, cost: 1, for: "k\(i)", owner: "app:\(i % owners)") }
            var evicted = try cache.setLimits(capacity: 10, preferred: 0).count
            #expect(evicted == AutoPurgingImageCache<Int>.purgeSlice, "\(owners) owners: one slice")
            #expect(cache.purgePending)
            var rounds = 1
            while cache.purgePending {
                evicted += cache.continuePurge().count
                rounds += 1
            }
            #expect(rounds == 4 && cache.memoryUsage <= 10, "\(owners) owners")
            #expect(evicted + cache.count == n)
        }
    }

    @Test("fair eviction with one owner is exactly the LRU purge")
    func fairEvictionOneOwnerIsLRU() throws {
        var fair = AutoPurgingImageCache<Int>(memoryCapacity: 10, preferredMemoryUsageAfterPurge: 6)
        var plain = AutoPurgingImageCache<Int>(memoryCapacity: 10, preferredMemoryUsageAfterPurge: 6)
        var rng: UInt64 = 42
        for i in 0..<500 {
            rng = rng &* 6364136223846793005 &+ 1442695040888963407
            let key = "k\(rng >> 60)"
            let cost = (rng >> 40) % 4 + 1
            if (rng >> 20) % 3 == 0 {
                _ = fair.image(for: key)
                _ = plain.image(for: key)
            } else {
                _ = try fair.add(i, cost: cost, for: key, owner: "only")
                _ = try plain.add(i, cost: cost, for: key)
            }
            #expect(fair.keysByRecency == plain.keysByRecency)
        }
    }

    @Test("an owner above its share cannot make a purge take from owners within theirs")
    func fairEvictionStopsAtKept() throws {
        var cache = AutoPurgingImageCache<Int>(memoryCapacity: 100, preferredMemoryUsageAfterPurge: 60)
        for i in 0..<10 { _ = try cache.add(i, cost: 1, for: "s\(i)", owner: "victim") }
        _ = try cache.add(1, cost: 64, for: "a", owner: "greedy")
        _ = try cache.add(2, cost: 64, for: "b", owner: "greedy")
        #expect(cache.peek("a") == nil && cache.peek("b") != nil)
        #expect(cache.count == 11, "above the preferred usage, within the capacity, and the victim whole")
    }

    /// The fair purge written the slow, obvious way: a list in recency order, scanned every time.
    struct NaiveFairCache {
        var items: [(key: String, owner: String, cost: UInt64)] = []  // most recent first
        let capacity: UInt64, preferred: UInt64
        var usage: UInt64 { items.reduce(0) { $0 + $1.cost } }

        func byOwner() -> [String: UInt64] { items.reduce(into: [:]) { $0[$1.owner, default: 0] += $1.cost } }

        func share(_ owner: String, _ usage: [String: UInt64]) -> UInt64 {
            let app = { (o: String) in o.split(separator: "/").first.map(String.init) ?? o }
            let apps = Set(usage.keys.map(app)).count
            let leaves = usage.keys.filter { app($0) == app(owner) }.count
            return capacity / UInt64(apps) / UInt64(leaves)
        }

        /// false: refused (nothing changed but the key's old entry).
        mutating func add(_ key: String, _ cost: UInt64, _ owner: String) -> Bool {
            items.removeAll { $0.key == key }
            items.insert((key, owner, cost), at: 0)
            guard usage > capacity else { return true }
            let owners = byOwner()
            if owners.count > 1, owners[owner]! > share(owner, owners) {
                let untouchable = owners.filter { $0.key != owner }.reduce(UInt64(0)) {
                    $0 + min($1.value, share($1.key, owners))
                }
                if untouchable + cost > capacity {
                    items.removeFirst()
                    return false
                }
            }
            purge(keeping: key)
            if usage > capacity {
                items.removeAll { $0.key == key }
                return false
            }
            return true
        }

        mutating func touch(_ key: String) {
            guard let i = items.firstIndex(where: { $0.key == key }) else { return }
            items.insert(items.remove(at: i), at: 0)
        }

        mutating func purge(keeping kept: String) {
            if Set(items.map(\.owner)).count <= 1 {
                while usage > preferred, let oldest = items.last, oldest.key != kept { items.removeLast() }
                return
            }
            while usage > preferred {
                let owners = byOwner()
                let over = owners.compactMap { o, u -> (String, UInt64)? in
                    let s = share(o, owners)
                    return u > s ? (o, u - s) : nil
                }.sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }
                var victim: String?
                for (owner, _) in over {
                    if let oldest = items.last(where: { $0.owner == owner && $0.key != kept }) {
                        victim = oldest.key
                        break
                    }
                }
                guard let victim else { return }
                items.removeAll { $0.key == victim }
            }
        }
    }

    @Test(
        "the fair purge, with owners coming and going, matches the obvious implementation over 3,000 random operations")
    func fairEvictionMatchesNaive() throws {
        var cache = AutoPurgingImageCache<Int>(memoryCapacity: 40, preferredMemoryUsageAfterPurge: 24)
        var naive = NaiveFairCache(capacity: 40, preferred: 24)
        var rng: UInt64 = 7
        func next() -> UInt64 {
            rng = rng &* 6364136223846793005 &+ 1442695040888963407
            return rng >> 33
        }
        for i in 0..<3000 {
            let key = "k\(next() % 30)"
            // Phases: one owner for a while (the ledger-free path), then several (two processes of
            // the unscoped pool among them), then one again.
            let owners = (i / 500) % 2 == 0 ? ["a"] : ["a", "b", "unscoped/pid:1", "unscoped/pid:2"]
            let owner = owners[Int(next() % UInt64(owners.count))]
            switch next() % 10 {
            case 0..<6:
                let cost = next() % 9 + 1
                let added = (try? cache.add(i, cost: cost, for: key, owner: owner)) != nil
                #expect(added == naive.add(key, cost, owner), "after operation \(i)")
            case 6..<9:
                _ = cache.image(for: key)
                naive.touch(key)
            default:
                _ = cache.remove(key)
                naive.items.removeAll { $0.key == key }
            }
            #expect(cache.keysByRecency == naive.items.map(\.key), "after operation \(i)")
            if cache.keysByRecency != naive.items.map(\.key) { return }
        }
    }
}

@Suite("Auto-purging image cache: prefetched images")
struct PrefetchedImageTests {
    typealias Cache = AutoPurgingImageCache<Int>

    @Test("A prefetched image takes only free room, evicts nothing, and is the first to go")
    func addIfRoom() throws {
        var cache = Cache(memoryCapacity: 30, preferredMemoryUsageAfterPurge: 30)
        try cache.add(1, cost: 10, for: "a")
        let p = cache.addIfRoom(2, cost: 10, for: "p")
        let q = cache.addIfRoom(3, cost: 11, for: "q")
        let again = cache.addIfRoom(9, cost: 1, for: "a")
        #expect(p)
        #expect(!q, "no free room: nothing is evicted for it")
        #expect(!again && cache.peek("a") == 1, "a key held stays as it is")
        try cache.add(4, cost: 10, for: "b")
        let evicted = try cache.add(5, cost: 10, for: "c")
        #expect(evicted == [2], "the prefetched image went first, though added after a")
        #expect(cache.keysByRecency == ["c", "b", "a"])
    }

    @Test("With several owners, it is its owner's first to go; a use makes it an ordinary entry")
    func owners() throws {
        var cache = Cache(memoryCapacity: 40, preferredMemoryUsageAfterPurge: 40)
        try cache.add(1, cost: 10, for: "a1", owner: "A")
        try cache.add(2, cost: 10, for: "b1", owner: "B")
        let added = [
            cache.addIfRoom(3, cost: 10, for: "a-pre", owner: "A"),
            cache.addIfRoom(4, cost: 10, for: "b-pre", owner: "B"),
        ]
        #expect(added == [true, true])
        _ = cache.image(for: "b-pre")
        try cache.add(5, cost: 10, for: "a2", owner: "A")
        #expect(cache.peek("a-pre") == nil && cache.peek("a1") == 1, "A is over its share: its prefetched image went")
        try cache.add(6, cost: 10, for: "b2", owner: "B")
        #expect(cache.peek("b1") == nil && cache.peek("b-pre") == 4, "used, b-pre counts as B's most recent")
    }
}
