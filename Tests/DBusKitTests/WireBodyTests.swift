// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import NetActivityTesting
import Testing

@testable import DBusKit

/// Bodies marshalled in Swift (`WireBody`) must be exactly what libdbus's iterators make of the
/// same appends: every message is built both ways and compared byte for byte, header included.
@Suite("Bodies marshalled here equal libdbus's")
struct WireBodyTests {
    /// The whole message as libdbus would send it (serial 0 on both sides: neither was sent). A
    /// body libdbus refused to load is dropped, so it shows here as a difference too.
    func marshalled(_ m: Message) -> [UInt8] { m.marshalled }

    func bothWays(
        _ name: String,
        make: () throws -> Message = { try Message.signal(path: "/t", interface: "org.example.T", member: "S") },
        _ body: (inout MessageWriter) throws -> Void
    ) throws {
        let here = try make()
        let there = try make()
        var w = here.writer()
        #expect(w.wire != nil, "\(name): a new message is marshalled here")
        try body(&w)
        var l = there.libdbusWriter()
        try body(&l)
        let a = marshalled(here)
        let b = marshalled(there)
        #expect(!a.isEmpty && a == b, "\(name): \(a.count) bytes here, \(b.count) through libdbus")
        #expect(here.signature == there.signature, "\(name)")
    }

    @Test("every kind of value, at the top level and nested")
    func kinds() throws {
        try bothWays("nothing") { _ in }
        try bothWays("fixed values") { w in
            w.append(UInt8(7))
            w.append(true)
            w.append(Int16(-2))
            w.append(UInt16(2))
            w.append(Int32(-3))
            w.append(UInt32(3))
            w.append(Int64(-4))
            w.append(UInt64(4))
            w.append(2.5)
            w.append(false)
        }
        try bothWays("alignment after a byte") { w in
            w.append(UInt8(1))
            w.append(UInt64(9))
            w.append(UInt8(2))
            w.append(Int16(3))
        }
        try bothWays("strings") { w in
            w.append("")
            w.append("é ü 日本")
            w.append(String(repeating: "s", count: 1001))
            w.append("cut\u{0}here")
        }
        try bothWays("path and signature") { w in
            w.append(UInt8(1))
            try w.appendObjectPath("/a/b")
            try w.appendSignature("a{sv}(ii)")
        }
        try bothWays("bytes") { w in
            w.append(UInt8(1))
            try w.appendBytes([UInt8](repeating: 1, count: 4099))
            try w.appendBytes([])
        }
        try bothWays("empty arrays of 8-aligned elements") { w in
            w.append(UInt8(1))
            w.appendArray(elementSignature: "t") { _ in }
            w.appendArray(elementSignature: "{sv}") { _ in }
            w.appendArray(elementSignature: "(yt)") { _ in }
        }
        try bothWays("structs in an array") { w in
            w.appendArray(elementSignature: "(yt)") { a in
                for i in 0..<100 {
                    a.appendStruct { s in
                        s.append(UInt8(i))
                        s.append(UInt64(i))
                    }
                }
            }
        }
        try bothWays("a top-level struct holding an array and a variant") { w in
            w.append(UInt8(3))
            try w.appendStruct { s in
                s.append("x")
                s.appendArray(elementSignature: "q") { a in
                    a.append(UInt16(1))
                    a.append(UInt16(2))
                }
                try s.appendVariant(signature: "(sd)") { v in
                    v.appendStruct { t in
                        t.append("in")
                        t.append(1.5)
                    }
                }
            }
            w.append(UInt8(4))
        }
        try bothWays("a vardict") { w in
            w.append("org.example.Task")
            try w.appendVardict([
                "a": .uint64(1), "bb": .string("x"), "c": .bytes([1, 2, 3]), "d": .objectPath("/o"), "e": .double(0.25),
            ])
            w.appendArray(elementSignature: "s") { a in a.append("gone") }
        }
        try bothWays("variants of every basic type") { w in
            for value: DBusValue in [
                .byte(1), .bool(true), .int16(-1), .uint16(1), .int32(-1), .uint32(1), .int64(-1), .uint64(1),
                .double(-0.5), .string("v"), .objectPath("/v"), .signature("a(sv)"),
            ] { try w.append(.variant(value)) }
        }
        try bothWays("nested arrays") { w in
            w.appendArray(elementSignature: "ay") { a in
                for n in [0, 1, 9, 17] { try? a.appendBytes([UInt8](repeating: 0, count: n)) }
            }
            w.appendArray(elementSignature: "aat") { a in
                a.appendArray(elementSignature: "at") { b in
                    b.appendArray(elementSignature: "t") { c in c.append(UInt64(1)) }
                }
            }
        }
        let unicast = {
            let m = try Message.signal(
                path: "/org/example/NetActivity", interface: "org.example.NetActivity.Downloader",
                member: "DownloadFinished")
            try m.setDestination(":1.42")
            return m
        }
        try bothWays("a unicast signal, its header written here too", make: unicast) { w in
            w.append("r1")
            w.append("http://h/x.png")
            w.append(true)
            w.append("")
            w.append("")
        }
        let call = {
            try Message.methodCall(destination: "org.example.T", path: "/t", interface: "org.example.T", member: "M")
        }
        try bothWays("a method call", make: call) { w in
            w.append("arg")
            w.append(UInt32(5))
        }
        try bothWays("a method return", make: { try call().makeReturn() }) { w in
            w.append("r")
            try w.appendObjectPath("/r")
        }
    }

    @Test("random value trees")
    func random() throws {
        var rng = SplitMix(
            seed: UInt64(getenv("WIRE_SEED").map { String(cString: $0) }.flatMap { UInt64($0) } ?? 0x5eed))
        // WIRE_SEED=N runs 3,000 rounds from another seed.
        let rounds = getenv("WIRE_SEED") == nil ? 300 : 3000
        var checked = 0
        for round in 0..<rounds {
            let values = (0..<(1 + rng.next(below: 4))).map { _ in Self.randomValue(&rng, depth: 0) }
            try bothWays("round \(round): \(values.map(\.signature))") { w in
                for v in values { try w.append(v) }
            }
            checked += 1
        }
        #expect(checked == rounds)
    }

    @Test("a container whose body throws is taken back whole")
    func rollBack() throws {
        struct Boom: Error {}
        let m = try Message.signal(path: "/t", interface: "org.example.T", member: "S")
        var w = m.writer()
        w.append(UInt8(1))
        #expect(throws: Boom.self) {
            try w.appendArray(elementSignature: "(st)") { a in
                try a.appendStruct { s in
                    s.append("half")
                    throw Boom()
                }
            }
        }
        w.append("after")
        let clean = try Message.signal(path: "/t", interface: "org.example.T", member: "S")
        var c = clean.libdbusWriter()
        c.append(UInt8(1))
        c.append("after")
        #expect(marshalled(m) == marshalled(clean))
        #expect(m.signature == "ys")
    }

    @Test("a file descriptor after values marshalled here goes through libdbus, in order")
    func descriptor() throws {
        var pipe: [Int32] = [-1, -1]
        #expect(Glibc.pipe(&pipe) == 0)
        defer {
            close(pipe[0])
            close(pipe[1])
        }
        let m = try Message.signal(path: "/t", interface: "org.example.T", member: "S")
        var w = m.writer()
        w.append("before")
        try w.appendFD(pipe[0])
        #expect(w.wire == nil)
        w.append(UInt64(7))
        #expect(m.signature == "sht")
        var r = m.reader()
        #expect(try r.read(String.self) == "before")
        let fd = try r.readFD()
        #expect(fd >= 0)
        close(fd)
        #expect(try r.read(UInt64.self) == 7)
        let inside = try Message.signal(path: "/t", interface: "org.example.T", member: "S")
        var i = inside.writer()
        #expect(throws: DBusError.self) { try i.appendArray(elementSignature: "h") { a in try a.appendFD(pipe[0]) } }
    }

    static func randomValue(_ rng: inout SplitMix, depth: Int) -> DBusValue {
        let leaf = depth >= 3 || rng.next(below: 3) == 0
        if leaf {
            switch rng.next(below: 12) {
            case 0: return .byte(UInt8(rng.next(below: 256)))
            case 1: return .bool(rng.next(below: 2) == 1)
            case 2: return .int16(Int16(truncatingIfNeeded: rng.next(below: 1 << 16)))
            case 3: return .uint16(UInt16(rng.next(below: 1 << 16)))
            case 4: return .int32(Int32(truncatingIfNeeded: rng.next(below: 1 << 32)))
            case 5: return .uint32(UInt32(rng.next(below: 1 << 32)))
            case 6: return .int64(Int64(bitPattern: rng.next()))
            case 7: return .uint64(rng.next())
            case 8: return .double(Double(rng.next(below: 1000)) / 7)
            case 9: return .string(String(repeating: "é", count: rng.next(below: 5)) + String(rng.next(), radix: 36))
            case 10: return .objectPath("/p" + String(rng.next(below: 100)))
            default: return .signature(["", "s", "a{sv}", "(yt)"][rng.next(below: 4)])
            }
        }
        switch rng.next(below: 5) {
        case 0:
            let sample = randomValue(&rng, depth: depth + 1)
            let items = (0..<rng.next(below: 4)).map { _ in Self.like(sample, &rng) }
            return .array(elementSignature: sample.signature, items)
        case 1:
            let key = DBusValue.string("k")
            let value = randomValue(&rng, depth: depth + 1)
            let entries = (0..<rng.next(below: 3)).map { i in (DBusValue.string("k\(i)"), Self.like(value, &rng)) }
            return .dict(keySignature: key.signature, valueSignature: value.signature, entries)
        case 2:
            return .structure((0..<(1 + rng.next(below: 3))).map { _ in randomValue(&rng, depth: depth + 1) })
        case 3:
            return .bytes((0..<rng.next(below: 12)).map { _ in UInt8(rng.next(below: 256)) })
        default:
            return .variant(randomValue(&rng, depth: depth + 1))
        }
    }

    /// Another value of the same signature as `v` (an array's elements must all have one).
    static func like(_ v: DBusValue, _ rng: inout SplitMix) -> DBusValue {
        switch v {
        case .uint64: .uint64(rng.next())
        case .string: .string(String(rng.next(below: 1000)))
        case .variant: .variant(randomValue(&rng, depth: 3))
        default: v
        }
    }
}
