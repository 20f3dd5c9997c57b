// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import Testing

@testable import DBusKit

/// `Connection.send` skips the walk for bus limits when `Message.bodyBound` says the body is
/// small. That is safe only while the bound is never below what the body takes on the wire.
@Suite("A built message's body bound")
struct BodyBoundTests {
    @Test("bodyBound is at least the wire length of every kind of body")
    func boundsTheBody() throws {
        var pipe: [Int32] = [-1, -1]
        #expect(Glibc.pipe(&pipe) == 0)
        defer {
            close(pipe[0])
            close(pipe[1])
        }
        let bodies: [(String, (inout MessageWriter) throws -> Void)] = [
            ("nothing", { _ in }),
            ("one byte", { w in w.append(UInt8(7)) }),
            (
                "fixed values",
                { w in
                    w.append(true)
                    w.append(Int16(-2))
                    w.append(UInt16(2))
                    w.append(Int32(-3))
                    w.append(UInt32(3))
                    w.append(Int64(-4))
                    w.append(UInt64(4))
                    w.append(2.5)
                }
            ),
            (
                "strings",
                { w in
                    w.append("")
                    w.append("é")
                    w.append(String(repeating: "s", count: 1001))
                }
            ),
            (
                "path and signature",
                { w in
                    try w.appendObjectPath("/a/b")
                    try w.appendSignature("a{sv}(ii)")
                }
            ),
            ("bytes", { w in try w.appendBytes([UInt8](repeating: 1, count: 4099)) }),
            ("an fd", { w in try w.appendFD(pipe[0]) }),
            (
                "bytes after a byte",
                { w in
                    w.append(UInt8(1))
                    try w.appendBytes([1, 2, 3])
                }
            ),
            (
                "structs in an array",
                { w in
                    w.appendArray(elementSignature: "(yt)") { a in
                        for i in 0..<100 {
                            a.appendStruct { s in
                                s.append(UInt8(i))
                                s.append(UInt64(i))
                            }
                        }
                    }
                }
            ),
            (
                "a vardict",
                { w in
                    try w.appendVardict([
                        "a": .uint64(1), "bb": .string("x"), "c": .bytes([1, 2, 3]), "d": .objectPath("/o"),
                    ])
                }
            ),
            (
                "values",
                { w in
                    try w.append(DBusValue.array(elementSignature: "t", [.uint64(1), .uint64(2)]))
                    try w.append(DBusValue.structure([.byte(1), .variant(.structure([.int16(1), .signature("s")]))]))
                    try w.append(DBusValue.dict(keySignature: "y", valueSignature: "s", [(.byte(1), .string("one"))]))
                    try w.append(DBusValue.unixFD(pipe[1]))
                }
            ),
            (
                "nested arrays",
                { w in
                    w.appendArray(elementSignature: "ay") { a in
                        for n in [0, 1, 9, 17] { try? a.appendBytes([UInt8](repeating: 0, count: n)) }
                    }
                }
            ),
        ]
        for (name, body) in bodies {
            let m = try Message.signal(path: "/t", interface: "org.example.T", member: "S")
            var w = m.writer()
            try body(&w)
            let wire = m.wireBodyLength
            #expect(wire >= 0, "\(name)")
            #expect(m.bodyBound >= UInt64(wire), "\(name): bound \(m.bodyBound) < wire \(wire)")
            // A bound far above the body would send every message through the walk again.
            #expect(m.bodyBound <= UInt64(wire) * 8 + 64, "\(name): bound \(m.bodyBound), wire \(wire)")
        }
        let call = try Message.methodCall(
            destination: "org.example.T", path: "/t", interface: "org.example.T", member: "M")
        let error = call.makeError(.failed(String(repeating: "e", count: 300)))
        #expect(error.bodyBound >= UInt64(error.wireBodyLength))
    }
}
