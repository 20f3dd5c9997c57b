// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract
import NetActivityCore
import Testing

@testable import NetActivityAgent

/// Who hears of which task, and how much of the tree one app may take, through the real
/// TaskService and its object server on a manual scheduler.
@Suite("TaskAudience: the tree's budget, its readers and a task's followers")
struct TaskAudienceTests {
    func begin(_ h: DriverHarness, _ owner: String) throws -> String {
        let reply = try #require(
            try h.call(owner, ActivityMember.Method.beginTask.rawValue) { w in
                w.append("sync")
                try w.appendVardict([:])
            })
        var r = reply.reader()
        return try r.readObjectPath()
    }

    func complete(_ h: DriverHarness, _ owner: String, _ path: String) throws {
        try h.call(owner, TaskMember.Method.complete.rawValue, path: path, interface: .task) { w in w.append("") }
    }

    @Test("past the budget an app's tasks wait out of the tree, alive; as listed ones leave, the oldest waiting enters")
    func listingBudget() throws {
        let h = DriverHarness(linger: 1)
        h.peers.identities[":1.7"] = ClientIdentity(app: "app:org.example.Hog")
        let budget = NetActivityLimits.listedTasksBudget
        let paths = try (0..<(budget + 3)).map { _ in try begin(h, ":1.7") }
        let audience = h.tasks.audience
        #expect(paths.prefix(budget).allSatisfy { audience.isListed($0) })
        #expect(paths.suffix(3).allSatisfy { !audience.isListed($0) }, "one app alone, past its share of the tree")
        #expect(h.objectManagerSignals(for: paths[budget]).isEmpty, "nobody hears of a task not in the tree")
        // Waiting tasks answer their owner as any other.
        try h.call(":1.7", TaskMember.Method.setProgress.rawValue, path: paths[budget], interface: .task) { w in
            for v: UInt64 in [1, 10, 0, 0] { w.append(v) }
        }
        // Another app under its share is listed at once.
        h.peers.identities[":1.8"] = ClientIdentity(app: "flatpak:org.example.Mail", isSandboxed: true)
        let mail = try begin(h, ":1.8")
        #expect(audience.isListed(mail))
        #expect(h.objectManagerSignals(for: mail).map(\.member) == ["InterfacesAdded"])
        // Two of the hog's listed tasks end and leave after the linger: its oldest waiting enters.
        h.at(0.1)
        try complete(h, ":1.7", paths[0])
        try complete(h, ":1.7", paths[1])
        h.at(2)
        // 198 + the mail's 1: under the budget, anyone's waiting task enters; at it, the hog (above
        // its share of 100 with two apps) lists no more.
        #expect(audience.isListed(paths[budget]))
        #expect(h.objectManagerSignals(for: paths[budget]).map(\.member) == ["InterfacesAdded"])
        #expect(h.context.accounts[.listedTasks].total == budget)
        #expect(!audience.isListed(paths[budget + 1]) && !audience.isListed(paths[budget + 2]))
        #expect(h.context.accounts[.listedTasks].share(ofApp: "app:org.example.Hog") == budget / 2)
    }

    @Test("a crowd of one app's tree readers is held to its share past the budget; another app's reader still hears")
    func treeReaders() throws {
        let h = DriverHarness()
        let audience = h.tasks.audience
        let budget = NetActivityLimits.treeReadersBudget
        // The harness's panel is one reader already (its own app).
        for i in 0..<(budget + 10) {
            let peer = ":1.\(1000 + i)"
            h.peers.identities[peer] = ClientIdentity.unscoped(pid: UInt32(5000 + i))
            audience.didRead(NetActivityBus.objectPath, caller: peer, tree: true)
        }
        let pool = h.context.accounts[.treeReaders].held(byApp: "unscoped")
        #expect(pool < budget, "the unscoped pool as one app, held to its share past the budget")
        h.peers.identities[":1.50"] = ClientIdentity(app: "app:org.gnome.Shell")
        audience.didRead(NetActivityBus.objectPath, caller: ":1.50", tree: true)
        let path = try begin(h, ":1.9")
        let hearing = try #require(audience.signalDestinations(for: path, tree: true))
        #expect(hearing.contains(":1.50") && hearing.contains(DriverHarness.panel))
        #expect(!hearing.contains(":1.\(1000 + budget + 9)"), "the last of the crowd was refused")
        // A reader that leaves makes room.
        let admitted = hearing.first { $0.hasPrefix(":1.1") }!
        audience.peerLeft(admitted)
        #expect(h.context.accounts[.treeReaders].held(byApp: "unscoped") == pool - 1)
    }

    @Test("a task's direct followers hear it, at most 16 of them: the one that began first gives way")
    func followers() throws {
        let h = DriverHarness()
        let audience = h.tasks.audience
        let path = try begin(h, ":1.9")
        let followers = (0...NetActivityLimits.maxFollowersPerTask).map { ":1.\(300 + $0)" }
        for peer in followers { audience.didRead(path, caller: peer, tree: false) }
        let hearing = try #require(audience.signalDestinations(for: path, tree: false))
        #expect(!hearing.contains(followers[0]))
        #expect(Set(followers.dropFirst()).isSubset(of: Set(hearing)))
        #expect(hearing.contains(DriverHarness.panel), "and the tree's readers")
        audience.peerLeft(followers[5])
        #expect(!(audience.signalDestinations(for: path, tree: false) ?? []).contains(followers[5]))
    }

    @Test("a sandboxed app reads its own app's tasks only; a host app reads all")
    func whoReads() throws {
        let h = DriverHarness()
        h.peers.identities[":1.7"] = ClientIdentity(app: "flatpak:org.example.A", isSandboxed: true)
        h.peers.identities[":1.8"] = ClientIdentity(app: "flatpak:org.example.B", isSandboxed: true)
        h.peers.identities[":1.9"] = ClientIdentity(app: "flatpak:org.example.A", isSandboxed: true)
        let a = try begin(h, ":1.7")
        let audience = h.tasks.audience
        #expect(audience.mayRead(a, caller: ":1.9"), "another connection of the same app")
        #expect(!audience.mayRead(a, caller: ":1.8"))
        #expect(audience.mayRead(a, caller: DriverHarness.panel))
    }
}
