// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract
import NetActivityCore
import Testing

@testable import NetActivityAgent

/// The agent's one accountant: the rooms charge it, the Accounts method reads it.
@Suite("AgentAccounts: every budget in one place")
struct AgentAccountsTests {
    typealias Row = (app: String, resource: String, held: UInt64, share: UInt64, budget: UInt64, limit: UInt64)

    func accounts(_ h: DriverHarness, _ app: String, caller: String = ":1.99") throws -> Result<[Row], DBusError> {
        let reply = try #require(try h.call(caller, ActivityMember.Method.accounts.rawValue) { w in w.append(app) })
        if reply.kind == .error { return .failure(DBusError(name: reply.errorName ?? "", message: "")) }
        var r = reply.reader()
        var array = try r.enterArray()
        var rows: [Row] = []
        while !array.isAtEnd() {
            var s = try array.enterStruct()
            rows.append((try s.read(), try s.read(), try s.read(), try s.read(), try s.read(), try s.read()))
        }
        return .success(rows)
    }

    @Test("tasks an app begins are charged to it in the accounts, and its departure gives them back")
    func tasksThroughTheService() throws {
        let h = DriverHarness()
        h.peers.identities[":1.7"] = ClientIdentity(app: "flatpak:org.example.Mail", isSandboxed: true)
        h.peers.identities[":1.8"] = ClientIdentity(app: "flatpak:org.example.Mail", isSandboxed: true)
        for owner in [":1.7", ":1.7", ":1.8"] {
            let reply = try #require(
                try h.call(owner, ActivityMember.Method.beginTask.rawValue) { w in
                    w.append("sync")
                    try w.appendVardict([:])
                })
            #expect(reply.kind == .methodReturn)
        }
        let rows = try accounts(h, "flatpak:org.example.Mail").get()
        #expect(rows.map(\.resource) == ActivityMember.Resource.allCases.map(\.rawValue), "every budget, in order")
        let tasks = try #require(rows.first { $0.resource == "tasks" })
        #expect(tasks.held == 3, "both connections, one app")
        #expect(tasks.share == UInt64(NetActivityLimits.liveTasksBudget), "the only app holding any: the whole budget")
        #expect(tasks.limit == UInt64(NetActivityLimits.maxLiveTasks))
        #expect(h.context.accounts[.tasks].held(byConnection: ":1.7") == 2)
        // Another app holding any halves the share.
        h.peers.identities[":1.9"] = ClientIdentity(app: "app:org.gnome.Terminal")
        _ = try h.call(":1.9", ActivityMember.Method.beginTask.rawValue) { w in
            w.append("build")
            try w.appendVardict([:])
        }
        let everyone = try accounts(h, "").get().filter { $0.resource == "tasks" }
        #expect(everyone.map(\.app) == ["app:org.gnome.Terminal", "flatpak:org.example.Mail"])
        #expect(everyone.allSatisfy { $0.share == UInt64(NetActivityLimits.liveTasksBudget / 2) })
        h.peers.depart(":1.7")
        #expect(try accounts(h, "flatpak:org.example.Mail").get().first { $0.resource == "tasks" }?.held == 1)
        h.peers.depart(":1.8")
        #expect(
            try accounts(h, "").get().allSatisfy {
                $0.app != "flatpak:org.example.Mail" || $0.resource == "listed-tasks"
            })
    }

    @Test("a sandboxed caller may not read the accounts; an overlong app name is InvalidArgs")
    func whoMayRead() throws {
        let h = DriverHarness()
        h.peers.identities[":1.5"] = ClientIdentity(app: "flatpak:org.example.Nosy", isSandboxed: true)
        #expect(throws: DBusError.self) { try accounts(h, "", caller: ":1.5").get() }
        if case .failure(let e) = try accounts(h, "", caller: ":1.5") {
            #expect(e.name == NetActivityError.Name.accessDenied.rawValue)
        }
        let long = String(repeating: "a", count: NetActivityLimits.maxAppNameBytes + 1)
        if case .failure(let e) = try accounts(h, long) {
            #expect(e.name == NetActivityError.Name.invalidArgs.rawValue)
        } else {
            Issue.record("an overlong app name was taken")
        }
        let held = try accounts(h, "").get()
        #expect(
            held.map { "\($0.app) \($0.resource) \($0.held)" } == ["\(DriverHarness.panel) tree-readers 1"],
            "the panel's reading alone")
    }

    @Test("a refusal names the budget; the figures come from the limits and the open-file limit")
    func refusal() throws {
        let accounts = AgentAccounts(fileLimit: 64)
        // leasesPerClient(64) = 4, leasesInAll(64) = 32.
        #expect(accounts[.leases].perConnection == 4 && accounts[.leases].limit == 32)
        for _ in 0..<4 { try accounts.take(.leases, connection: ":1.3", leaf: "app:a") }
        #expect(throws: NetActivityError.self) { try accounts.take(.leases, connection: ":1.3", leaf: "app:a") }
        do {
            try accounts.take(.leases, connection: ":1.3", leaf: "app:a")
        } catch {
            #expect(error.name == NetActivityError.Name.limitsExceeded.rawValue)
            #expect(error.message.contains("4 leases"), "\(error.message)")
        }
        accounts.release(.leases, connection: ":1.3", leaf: "app:a", cost: 4)
        #expect(accounts.holdings(of: nil).isEmpty)
    }

    final class Book: AccountBook {
        func holdings(_ resource: AgentAccounts.Resource, of app: String?) -> [AgentAccounts.Holding] {
            AgentAccounts.holdings(
                of: app, resource, usage: ["app:a": 10, "unscoped/pid:3": 5, "unscoped/pid:4": 7, "": 1], capacity: 100)
        }
    }

    @Test("a room's own ledger of bytes shows by app, its leaves summed; a room that is gone shows nothing")
    func books() throws {
        let accounts = AgentAccounts()
        var book: Book? = Book()
        accounts.show([.images], from: book!)
        let rows = accounts.holdings(of: nil)
        #expect(rows.map(\.app) == ["app:a", "unscoped"], "what no app holds (\"\") is left out")
        #expect(rows.map(\.held) == [10, 12])
        #expect(rows.allSatisfy { $0.share == 50 && $0.budget == 100 && $0.limit == 100 })
        #expect(accounts.holdings(of: "flatpak:new").first { $0.resource == .images }?.share == 33)
        book = nil
        #expect(accounts.holdings(of: nil).isEmpty)
    }

    @Test("the quotas and the caches' ledgers share one formula")
    func oneShareRule() throws {
        var quota = FairQuota(budget: 600, perConnection: .max)
        var ledger = OwnerLedger<String>()
        for (i, leaf) in ["app:a", "unscoped/pid:1", "unscoped/pid:2"].enumerated() {
            quota.charge(connection: ":1.\(i)", leaf: leaf)
            ledger.note("k\(i)", cost: 1, owner: leaf)
        }
        for leaf in ["app:a", "unscoped/pid:1", "unscoped/pid:9", "flatpak:b"] {
            #expect(UInt64(quota.share(of: leaf)) == ledger.share(of: leaf, capacity: 600), "\(leaf)")
        }
        #expect(quota.share(of: "unscoped/pid:9") == 600 / 2 / 3)
    }
}
