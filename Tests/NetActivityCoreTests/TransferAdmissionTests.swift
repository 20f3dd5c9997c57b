// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

/// The fetcher's admission of response bytes: a quota per turn of the loop, and the bytes in
/// flight bounded per app without ever deadlocking.
@Suite("Transfer admission")
struct TransferAdmissionTests {
    @Test("all transfers together take at most the turn's quota; the rest waits for the next turn")
    func perTurn() {
        var a = TransferAdmission(inFlightLimit: 1 << 30, turnQuota: 100)
        a.started(1, app: "x")
        a.started(2, app: "y")
        let v1 = a.offer(1, bytes: 60)
        #expect(v1 == .take)
        let v2 = a.offer(2, bytes: 60)
        #expect(v2 == .take, "the chunk that crosses the quota is still taken")
        let v3 = a.offer(1, bytes: 1)
        #expect(v3 == .nextTurn)
        let v4 = a.offer(2, bytes: 1)
        #expect(v4 == .nextTurn)
        let v5 = a.newTurn()
        #expect(v5, "that turn took its whole quota: the loop lets others go first")
        let v6 = a.offer(2, bytes: 1)
        #expect(v6 == .take)
        let v7 = a.newTurn()
        #expect(!v7, "a light turn: no need")
        let v8 = a.newTurn()
        #expect(!v8, "an idle turn")
        #expect(a.charged(1) == 60 && a.charged(2) == 61)
    }

    @Test("a continued body's bytes are charged from its start, and freed at its end")
    func holding() {
        var a = TransferAdmission(inFlightLimit: 1000)
        a.started(1, app: "x", holding: 900)
        #expect(a.charged(1) == 900 && a.inFlight.total == 900)
        a.started(2, app: "y")
        let v1 = a.offer(2, bytes: 200)
        #expect(v1 == .waitForRoom, "the held bytes count against the limit")
        let freed = a.ended(1)
        #expect(freed, "bytes freed: waiting transfers try again")
        #expect(a.inFlight.total == 0)
        let v2 = a.offer(2, bytes: 200)
        #expect(v2 == .take)
    }

    @Test("past the budget an app waits for room beyond its share; another app still gets its own")
    func shares() {
        // Limit 1000: budget 400 before shares apply.
        var a = TransferAdmission(inFlightLimit: 1000)
        a.started(1, app: "hog")
        a.started(2, app: "hog")
        a.started(3, app: "hog")
        a.started(4, app: "polite")
        let v9 = a.offer(2, bytes: 300)
        #expect(v9 == .take, "under the budget: anyone")
        let v10 = a.offer(3, bytes: 300)
        #expect(v10 == .waitForRoom, "past the budget and its app's share, and not its app's oldest")
        let v11 = a.offer(4, bytes: 200)
        #expect(v11 == .take, "another app still gets its share")
        let v12 = a.offer(1, bytes: 300)
        #expect(v12 == .take, "the oldest transfer always may: it completes and frees its bytes")
        #expect(a.inFlight.total == 800)
        let v13 = a.ended(2)
        #expect(v13, "it held bytes: the waiting may try again")
        let v14 = a.ended(99)
        #expect(!v14)
        let v15 = a.offer(3, bytes: 300)
        #expect(v15 == .waitForRoom, "still past its share, and transfer 1 is older")
        let v16 = a.ended(1)
        #expect(v16)
        let v17 = a.offer(3, bytes: 300)
        #expect(v17 == .take, "its app's oldest now, within the limit")
        #expect(a.charged(3) == 300 && a.inFlight.total == 500)
    }

    @Test("the oldest transfer may always go on, even past the limit: bytes in flight never deadlock")
    func oldestAlwaysProceeds() {
        var a = TransferAdmission(inFlightLimit: 100, turnQuota: .max)
        a.started(5, app: "x")
        a.started(6, app: "x")
        let v18 = a.offer(6, bytes: 30)
        #expect(v18 == .take, "under the budget (40)")
        let v19 = a.offer(6, bytes: 20)
        #expect(v19 == .waitForRoom, "past it, over its share, and not the oldest")
        let v20 = a.offer(5, bytes: 500)
        #expect(v20 == .take, "the oldest, even past the limit")
        let v21 = a.ended(5)
        #expect(v21)
        let v22 = a.offer(6, bytes: 20)
        #expect(v22 == .take, "now the oldest itself")
        let v23 = a.ended(7)
        #expect(!v23, "unknown")
        let v24 = a.ended(6)
        #expect(v24)
        #expect(a.inFlight.total == 0)
    }
}
