// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract
import NetActivityCore
import Testing

/// The Visible timeline and the coalesced ActivityCount/Clients signal, driven through the real
/// ActivityService (its interface table, the object server, the state machine) on a manual
/// scheduler: every time below is exact, and nothing sleeps.
@Suite("ActivityService on a manual scheduler")
struct ActivityServiceTests {
    typealias P = ActivityMember.Property

    func ms(_ seconds: Double) -> Int { Int((seconds * 1000).rounded()) }

    @Test("the default delays: Visible at 1.0 s after the first increment, gone 0.17 s after the last decrement")
    func visibleTimeline() throws {
        let h = DriverHarness()
        try h.increment(":1.5")
        h.at(2.0)
        try h.decrement(":1.5")
        h.at(10)
        #expect(h.visible.map { ms($0.at) } == [1000, 2170])
        #expect(h.visible.map(\.value) == [true, false])
        let states = h.changes(.activity).compactMap { c in
            c.values[P.state.rawValue]?.unwrapped.stringValue.map { (ms(c.at), $0) }
        }
        #expect(states.map(\.0) == [0, 1000, 2000, 2170])
        #expect(states.map(\.1) == ["delaying-start", "active", "delaying-end", "not-active"])
        // Visible goes out in the same PropertiesChanged as the State it belongs to.
        let visibleProperty = h.changes(.activity).compactMap { c in
            c.values[P.visible.rawValue]?.unwrapped.boolValue.map { (ms(c.at), $0) }
        }
        #expect(visibleProperty.map(\.0) == [1000, 2170])
    }

    @Test(
        "The contract's consequences: 0/0 gives [true, false]; a short blip gives nothing; no flicker in the completion delay"
    )
    func designConsequences() throws {
        let zero = DriverHarness(activation: 0, completion: 0)
        try zero.increment(":1.5")
        try zero.decrement(":1.5")
        zero.at(1)
        // Both timers were due at 0: the activation timer found the count back at 0.
        #expect(zero.visible.map(\.value) == [])

        let instant = DriverHarness(activation: 0, completion: 0)
        try instant.increment(":1.5")
        instant.at(0.001)
        try instant.decrement(":1.5")
        instant.at(1)
        #expect(instant.visible.map(\.value) == [true, false])

        let blip = DriverHarness(activation: 0.1, completion: 0.17)
        try blip.increment(":1.5")
        blip.at(0.05)
        try blip.decrement(":1.5")
        blip.at(5)
        #expect(blip.visible.isEmpty)

        let flicker = DriverHarness(activation: 0, completion: 0.2)
        try flicker.increment(":1.5")
        flicker.at(0.1)
        try flicker.decrement(":1.5")
        flicker.at(0.2)
        try flicker.increment(":1.5")
        flicker.at(0.3)
        try flicker.decrement(":1.5")
        flicker.at(5)
        #expect(flicker.visible.map(\.value) == [true, false])
        #expect(flicker.visible.map { ms($0.at) } == [0, 500])
    }

    @Test(
        "ActivityCount and Clients: the first change at once, the rest folded into one signal 50 ms later, none when back where they were"
    )
    func coalescing() throws {
        let h = DriverHarness()
        try h.increment(":1.5")  // t = 0: goes out at once, with the State change
        for i in 1...9 {
            h.at(Double(i) / 1000)
            try h.increment(":1.5")
        }
        h.at(0.2)
        var counts = h.changes(.activity).compactMap { c in
            c.values[P.activityCount.rawValue]?.unwrapped.uint32Value.map { (ms(c.at), $0) }
        }
        #expect(counts.map(\.0) == [0, 50])
        #expect(counts.map(\.1) == [1, 10])

        // The process name arrives later: one Clients change carrying it, and no ActivityCount.
        h.peers.names[":1.5"] = "curl"
        h.peers.deliverNames()
        let clients = h.changes(.activity).last?.values[P.clients.rawValue]?.unwrapped.arrayElements
        #expect(clients == [.structure([.string(":1.5"), .string("curl"), .uint32(10)])])
        #expect(h.changes(.activity).last?.values[P.activityCount.rawValue] == nil)

        // Up and back down within the interval: the count that went out at once stands, and the
        // end of the interval sends nothing.
        h.at(0.4)
        try h.increment(":1.5")
        h.at(0.41)
        try h.decrement(":1.5")
        h.at(0.42)
        try h.increment(":1.5")
        let before = h.changes(.activity).count
        h.at(0.9)
        counts = h.changes(.activity).compactMap { c in
            c.values[P.activityCount.rawValue]?.unwrapped.uint32Value.map { (ms(c.at), $0) }
        }
        #expect(counts.last.map { [$0.0, Int($0.1)] } == [400, 11])
        #expect(h.changes(.activity).count == before)
    }

    @Test("a client that leaves releases its counts at once; the indicator then ends after the completion delay")
    func departure() throws {
        let h = DriverHarness(activation: 0, completion: 0.17)
        try h.increment(":1.5")
        try h.increment(":1.5")
        try h.increment(":1.6")
        h.at(1)
        h.peers.depart(":1.5")
        h.at(2)
        try h.decrement(":1.6")
        h.at(3)
        #expect(h.visible.map { [ms($0.at), $0.value ? 1 : 0] } == [[0, 1], [2170, 0]])
        let counts = h.changes(.activity).compactMap { c in c.values[P.activityCount.rawValue]?.unwrapped.uint32Value }
        #expect(counts == [1, 3, 1, 0])  // at once, folded at 50 ms, the departure, the last decrement
    }

    @Test(
        "Reasons: each client's distinct lease reasons, announced as invalidated (never the text), read in full by host apps and only for its own app by a sandboxed one"
    )
    func reasons() throws {
        let h = DriverHarness()
        h.peers.identities[":1.6"] = ClientIdentity(app: "flatpak:org.example.Mail", isSandboxed: true)
        h.peers.identities[":1.7"] = ClientIdentity(app: "flatpak:org.example.Chat", isSandboxed: true)
        func lease(_ sender: String, _ reason: String) throws {
            let reply = try h.call(sender, ActivityMember.Method.beginActivity.rawValue) { w in w.append(reason) }
            #expect(reply?.kind == .methodReturn)
        }
        func reasons(caller: String) throws -> [String: [String]] {
            guard
                case .dict(_, _, let entries) = try h.property(
                    NetActivityBus.objectPath, .activity, P.reasons.rawValue, caller: caller)
            else { return [:] }
            var out: [String: [String]] = [:]
            for (key, value) in entries { out[key.stringValue ?? "?"] = value.arrayElements?.compactMap(\.stringValue) }
            return out
        }
        try lease(":1.5", "Backing up photos")
        try lease(":1.5", "")  // no reason: counted, not listed
        try lease(":1.5", "Backing up photos")  // listed once
        try lease(":1.5", "Syncing calendar")
        try lease(":1.6", "Fetching mail for alice@example.com")
        h.at(0.2)
        #expect(
            try reasons(caller: ":1.99") == [
                ":1.5": ["Backing up photos", "Syncing calendar"], ":1.6": ["Fetching mail for alice@example.com"],
            ])
        // Sandboxed: its own app's rows only, nothing of another app's.
        #expect(try reasons(caller: ":1.6") == [":1.6": ["Fetching mail for alice@example.com"]])
        #expect(try reasons(caller: ":1.7") == [:])
        // Broadcast signals name the property and never carry a reason.
        #expect(h.invalidations(.activity).flatMap(\.names).allSatisfy { $0 == P.reasons.rawValue })
        #expect(!h.invalidations(.activity).isEmpty)
        #expect(h.changes(.activity).allSatisfy { $0.values[P.reasons.rawValue] == nil })
        // The rows people read on the desktop carry them.
        #expect(h.activity.clientRows.contains { $0.hasSuffix("(4) — Backing up photos, Syncing calendar") })

        // A departure takes its reasons away, and says so.
        let before = h.invalidations(.activity).count
        h.peers.depart(":1.6")
        h.at(0.5)
        #expect(h.invalidations(.activity).count == before + 1)
        #expect(try reasons(caller: ":1.99") == [":1.5": ["Backing up photos", "Syncing calendar"]])
        // A lease with no reason changes the count, not Reasons.
        let quiet = h.invalidations(.activity).count
        try lease(":1.5", "")
        h.at(1.0)
        #expect(h.invalidations(.activity).count == quiet)
    }

    @Test("a handler's contract error reaches the caller with its D-Bus name")
    func contractErrors() throws {
        let h = DriverHarness()
        let reply = try h.call(":1.5", ActivityMember.Method.beginActivity.rawValue) { w in
            w.append(String(repeating: "x", count: NetActivityLimits.maxReasonBytes + 1))
        }
        #expect(reply?.kind == .error)
        #expect(reply?.errorName == NetActivityError.Name.invalidArgs.rawValue)
        #expect(reply?.errorMessage.contains("the limit is 1024") == true)
    }
}
