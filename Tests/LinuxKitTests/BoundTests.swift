// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import LinuxKit
import Testing

/// `bound`: a handler that hands its target to the body and never keeps it alive.
@Suite("Handlers bound to their target")
struct BoundTests {
    final class Target {
        var heard: [String] = []
    }

    struct WrongTarget: Error {}

    @Test("the body gets the target and the handler's arguments, in order")
    func passesTarget() throws {
        let target = Target()
        let one = bound(target) { (t, a: String) in t.heard.append(a) }
        let three = bound(target) { (t, a: String, b: Int, c: Bool) in t.heard.append("\(a) \(b) \(c)") }
        let four = bound(target) { (t, a: Int, b: Int, c: Int, d: Int) -> Int in
            t.heard.append("sum")
            return a * 1000 + b * 100 + c * 10 + d
        }
        one("first")
        three("x", 2, true)
        #expect(four(1, 2, 3, 4) == 1234)
        var writer = ""
        let throwing = bound(target) { (t, w: inout String) throws in
            guard t.heard.count == 3 else { throw WrongTarget() }
            w += "written"
        }
        try throwing(&writer)
        #expect(target.heard == ["first", "x 2 true", "sum"])
        #expect(writer == "written")
    }

    @Test("a handler kept after its target's last reference does not keep it alive")
    func holdsNothing() {
        var handlers: [() -> Void] = []
        weak var gone: Target?
        do {
            let target = Target()
            gone = target
            handlers.append(bound(target) { $0.heard.append("called") })
            handlers[0]()
            #expect(target.heard == ["called"])
        }
        #expect(gone == nil, "the handler held its target")
        #expect(handlers.count == 1)
    }
}
