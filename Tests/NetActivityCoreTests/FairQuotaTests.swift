// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import NetActivityTesting
import Testing

@Suite("One accountant: budget, shares with a floor, caps")
struct FairQuotaTests {
    @Test("one app alone takes the whole budget; a newcomer under its share is never refused; the hog is")
    func floor() throws {
        var q = FairQuota(budget: 100, limit: 200, perConnection: 1000)
        for _ in 0..<100 { try q.take(connection: ":1.1", leaf: "app:hog") }
        #expect(q.check(connection: ":1.1", leaf: "app:hog") == .share(held: 100, share: 100))
        // A newcomer's share is 100 / 2: it gets all of it, past the budget.
        for _ in 0..<50 { try q.take(connection: ":1.2", leaf: "app:polite") }
        #expect(q.check(connection: ":1.2", leaf: "app:polite") == .share(held: 50, share: 50))
        #expect(q.check(connection: ":1.1", leaf: "app:hog") == .share(held: 100, share: 50))
        // A third app: 33 each; the polite app is now above its share too.
        try q.take(connection: ":1.3", leaf: "flatpak:org.example.Third")
        #expect(q.total == 151)
        q.release(connection: ":1.1", leaf: "app:hog", cost: 100)
        #expect(q.appCount == 2 && q.total == 51)
        // Below the budget again: anyone is admitted.
        #expect(q.check(connection: ":1.2", leaf: "app:polite") == nil)
    }

    @Test("forked processes of the unscoped pool divide one app's share; a fresh process still gets its floor")
    func pool() throws {
        var q = FairQuota(budget: 120, perConnection: 1000)
        for p in 0..<4 {
            for _ in 0..<30 { try q.take(connection: ":1.\(p)", leaf: "unscoped/pid:\(p)") }
        }
        // The pool holds the budget; a fifth process has 120 / 1 / 5 = 24.
        #expect(q.share(of: "unscoped/pid:9") == 24)
        for _ in 0..<24 { try q.take(connection: ":1.9", leaf: "unscoped/pid:9") }
        #expect(q.check(connection: ":1.9", leaf: "unscoped/pid:9") != nil)
        // A Flatpak arriving now has half the budget however many processes the pool forked.
        #expect(q.share(of: "flatpak:org.example.App") == 60)
        #expect(q.check(connection: ":1.20", leaf: "flatpak:org.example.App") == nil)
    }

    @Test("held to its app's share, a pool of new processes cannot use up the room other apps' floors need")
    func appsHeldToShare() throws {
        var held = FairQuota(budget: 10, limit: 25, perConnection: 4, holdsAppsToShare: true)
        var loose = FairQuota(budget: 10, limit: 25, perConnection: 4)
        for p in 0..<25 {
            _ = try? held.take(connection: ":1.\(p)", leaf: "unscoped/pid:\(p)")
            _ = try? loose.take(connection: ":1.\(p)", leaf: "unscoped/pid:\(p)")
        }
        #expect(loose.total == 25, "each new process under its own share: the pool reaches the limit")
        #expect(held.total == 10, "the pool alone holds the budget, its app's whole share, and no more")
        #expect(loose.check(connection: ":1.99", leaf: "flatpak:org.example.App") == .total(held: 25))
        #expect(held.check(connection: ":1.99", leaf: "flatpak:org.example.App") == nil, "another app's floor")
        try held.take(connection: ":1.99", leaf: "flatpak:org.example.App")
        #expect(held.check(connection: ":1.98", leaf: "unscoped/pid:98") == .share(held: 10, share: 5))
    }

    @Test("the per-connection cap and the hard limit")
    func caps() throws {
        var q = FairQuota(budget: 10, limit: 12, perConnection: 3)
        for _ in 0..<3 { try q.take(connection: ":1.1", leaf: "app:a") }
        #expect(q.check(connection: ":1.1", leaf: "app:a") == .connection(held: 3))
        for c in 2...6 {
            for _ in 0..<2 { _ = try? q.take(connection: ":1.\(c)", leaf: "app:\(c)") }
        }
        // Apps 2-5 fill the budget and app 5 its share past it; app 6 takes its share of 1, the last
        // the hard limit allows.
        #expect(q.total == 12)
        #expect(q.held(byLeaf: "app:6") == 1)
        #expect(q.check(connection: ":1.50", leaf: "app:new") == .total(held: 12))
    }

    /// The rule written the obvious way: holdings as a list, recounted on every question.
    struct Naive {
        let budget: Int, limit: Int, perConnection: Int
        var held: [(connection: String, leaf: String)] = []

        func check(_ connection: String, _ leaf: String) -> Bool {
            if held.filter({ $0.connection == connection }).count + 1 > perConnection { return false }
            if held.count + 1 > limit { return false }
            if held.count + 1 <= budget { return true }
            let app = leaf.split(separator: "/").first.map(String.init) ?? leaf
            var apps = Set(held.map { $0.leaf.split(separator: "/").first.map(String.init) ?? $0.leaf })
            apps.insert(app)
            var leaves = Set(
                held.filter { ($0.leaf.split(separator: "/").first.map(String.init) ?? $0.leaf) == app }.map(\.leaf))
            leaves.insert(leaf)
            let share = max(1, budget / apps.count / leaves.count)
            return held.filter { $0.leaf == leaf }.count + 1 <= share
        }
    }

    @Test("matches the obvious implementation over 20,000 random takes and releases, with apps coming and going")
    func matchesNaive() {
        var rng = SplitMix(seed: 27)
        var q = FairQuota(budget: 40, limit: 70, perConnection: 12)
        var naive = Naive(budget: 40, limit: 70, perConnection: 12)
        let leaves = [
            "app:a", "app:b", "flatpak:c", "unscoped/pid:1", "unscoped/pid:2", "unscoped/pid:3", "unscoped/gone",
        ]
        for step in 0..<20_000 {
            let leaf = leaves[Int(rng.next() % UInt64(leaves.count))]
            let connection = ":1.\(leaf.count % 3)-\(leaf)-\(rng.next() % 2)"
            if rng.next() % 3 == 0, !naive.held.isEmpty {
                let h = naive.held.remove(at: Int(rng.next() % UInt64(naive.held.count)))
                q.release(connection: h.connection, leaf: h.leaf)
            } else {
                let admitted = q.check(connection: connection, leaf: leaf) == nil
                #expect(admitted == naive.check(connection, leaf), "step \(step): \(leaf) on \(connection)")
                if admitted != naive.check(connection, leaf) { return }
                if admitted {
                    q.charge(connection: connection, leaf: leaf)
                    naive.held.append((connection, leaf))
                }
            }
            #expect(q.total == naive.held.count && q.total <= 70)
        }
    }
}
