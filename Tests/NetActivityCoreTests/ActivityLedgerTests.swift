// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

@Suite("Per-client activity ledger")
struct ActivityLedgerTests {
    @Test("counts are per client and the total is their sum")
    func perClient() throws {
        var l = ActivityLedger()
        try l.add(.count, for: ":1.1")
        try l.add(.count, for: ":1.1")
        try l.add(.lease, for: ":1.2")
        #expect(l.total == 3)
        #expect(l.count(of: ":1.1") == 2)
        #expect(l.count(of: ":1.2") == 1)
    }

    @Test("a decrement never goes below zero and cannot lower another client's count (#2556)")
    func clampedAndOwn() throws {
        var l = ActivityLedger()
        try l.add(.count, for: ":1.1")
        #expect(l.remove(.count, for: ":1.2") == false)
        #expect(l.total == 1)
        #expect(l.remove(.count, for: ":1.1") == true)
        #expect(l.remove(.count, for: ":1.1") == false)
        #expect(l.total == 0)
    }

    @Test("a lease or task cannot be removed as a count")
    func sourcesAreSeparate() throws {
        var l = ActivityLedger()
        try l.add(.lease, for: ":1.1")
        #expect(l.remove(.count, for: ":1.1") == false)
        #expect(l.total == 1)
    }

    @Test("removing a client releases everything it held")
    func removeClient() throws {
        var l = ActivityLedger()
        try l.add(.count, for: ":1.1")
        try l.add(.lease, for: ":1.1")
        try l.add(.task, for: ":1.1")
        try l.add(.count, for: ":1.2")
        let gone = l.removeClient(":1.1")
        #expect(gone?.total == 3)
        #expect(l.total == 1)
        #expect(l.removeClient(":1.1") == nil)
    }

    @Test("limits per client throw and change nothing")
    func limits() throws {
        var l = ActivityLedger()
        l.limits[.lease] = 2
        try l.add(.lease, for: ":1.1")
        try l.add(.lease, for: ":1.1")
        #expect(throws: ActivityLedger.LimitError(source: .lease, limit: 2)) { try l.add(.lease, for: ":1.1") }
        #expect(l.total == 2)
        try l.add(.lease, for: ":1.2")  // another client is not affected
        #expect(l.total == 3)
    }

    @Test("add says when a client is new; a refused add on a new client records nothing")
    func addReportsNewClients() throws {
        var l = ActivityLedger()
        #expect(try l.add(.count, for: ":1.4") == true)
        #expect(try l.add(.lease, for: ":1.4") == false)
        #expect(l.count(of: ":1.4") == 2)
        l.limits[.task] = 0
        #expect(throws: ActivityLedger.LimitError(source: .task, limit: 0)) { try l.add(.task, for: ":1.5") }
        #expect(l.clients[":1.5"] == nil)
        #expect(throws: ActivityLedger.LimitError(source: .task, limit: 0)) { try l.add(.task, for: ":1.4") }
        #expect(l.count(of: ":1.4") == 2)
        #expect(l.total == 2)
    }

    @Test("active clients are listed in name order with their process names; idle ones are not")
    func activeClients() throws {
        var l = ActivityLedger()
        #expect(l.touch(":1.9") == true)
        #expect(l.touch(":1.9") == false)
        l.setProcessName("firefox", for: ":1.9")
        try l.add(.count, for: ":1.9")
        try l.add(.count, for: ":1.10")
        _ = l.touch(":1.3")
        let list = l.activeClients
        #expect(list.map(\.name) == [":1.10", ":1.9"])
        #expect(list.map(\.processName) == ["", "firefox"])
        #expect(list.map(\.count) == [1, 1])
    }
}
