// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

/// Which pooled connections must stay silent: the fetcher watches those the table calls idle.
@Suite("Idle connection guard")
struct IdleConnectionGuardTests {
    typealias Guard = IdleConnectionGuard<Int, String>

    enum Step {
        case wanted(Int, String?)
        case unwanted(Int)
        case finished(Int, String, http2: Bool, idle: Bool)
        case taken(Int, String)
        case released(String)
        case closed(Int)
    }

    static func run(_ steps: [Step]) -> Guard {
        var table = Guard()
        for step in steps {
            switch step {
            case .wanted(let socket, let transfer): table.wanted(socket, by: transfer)
            case .unwanted(let socket): table.unwanted(socket)
            case .finished(let socket, let transfer, let http2, let idle):
                let became = table.finished(socket, by: transfer, http2: http2)
                #expect(became == idle, "\(transfer) finishing on \(socket)")
                if became { table.becameIdle(socket) }
            case .taken(let socket, let transfer):
                if table.isIdle(socket) { table.leftIdle(socket) }
                table.taken(socket, by: transfer)
            case .released(let transfer): table.released(transfer)
            case .closed(let socket): table.closed(socket)
            }
        }
        return table
    }

    @Test("an HTTP/1 connection whose transfer finished with nothing wanted is idle")
    func idleAfterFinish() {
        let table = Self.run([.wanted(5, "a"), .unwanted(5), .finished(5, "a", http2: false, idle: true)])
        #expect(table.idle == [5] && table.busy.isEmpty)
    }

    @Test("a socket libcurl still wants events on is busy, not idle")
    func busyIsNotIdle() {
        let table = Self.run([.wanted(5, "a"), .finished(5, "a", http2: false, idle: false)])
        #expect(table.idle.isEmpty && table.busy == [5])
    }

    @Test("HTTP/2 connections carry frames while idle: never watched")
    func http2() {
        let table = Self.run([.wanted(5, "a"), .unwanted(5), .finished(5, "a", http2: true, idle: false)])
        #expect(table.idle.isEmpty)
    }

    @Test("a transfer that took the connection and paused at once (no socket callback) owns it")
    func pausedTaker() {
        // b takes the pooled connection within the call that finishes a, and pauses before libcurl
        // names the socket for it: a's finish must not call the connection idle under b's response.
        let table = Self.run([
            .wanted(5, "a"), .unwanted(5), .taken(5, "b"), .finished(5, "a", http2: false, idle: false),
        ])
        #expect(table.idle.isEmpty)
        // b's own finish makes it idle.
        var after = table
        let idle = after.finished(5, by: "b", http2: false)
        #expect(idle)
    }

    @Test("taking an idle connection makes it busy work again; wanting events does too")
    func leavingIdle() {
        let taken = Self.run([
            .wanted(5, "a"), .unwanted(5), .finished(5, "a", http2: false, idle: true), .taken(5, "b"),
        ])
        #expect(taken.idle.isEmpty)
        let wanted = Self.run([
            .wanted(5, "a"), .unwanted(5), .finished(5, "a", http2: false, idle: true), .wanted(5, nil),
        ])
        #expect(wanted.idle.isEmpty && wanted.busy == [5])
    }

    @Test("a released transfer names no socket: a new transfer at the same address is not mistaken for it")
    func released() {
        let table = Self.run([
            .wanted(5, "a"), .unwanted(5), .released("a"), .finished(5, "a", http2: false, idle: true),
        ])
        #expect(table.idle == [5])
        #expect(Self.run([.wanted(5, "a"), .released("a")]).known == [5], "busy still")
        #expect(Self.run([.taken(7, "a"), .released("a")]).known.isEmpty)
    }

    @Test("a closed socket is forgotten entirely")
    func closed() {
        let table = Self.run([
            .wanted(5, "a"), .unwanted(5), .finished(5, "a", http2: false, idle: true), .wanted(6, "b"), .closed(5),
            .closed(6),
        ])
        #expect(table.known.isEmpty && table.idle.isEmpty && table.busy.isEmpty)
    }

    @Test("a connection made dead is idle no more")
    func dead() {
        var table = Self.run([.wanted(5, "a"), .unwanted(5), .finished(5, "a", http2: false, idle: true)])
        table.dead(5)
        #expect(!table.isIdle(5))
    }
}
