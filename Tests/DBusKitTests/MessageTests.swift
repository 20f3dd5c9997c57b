// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import Testing

/// Messages built and read with no bus: marshalling round trips and the checks that keep
/// invalid input away from libdbus.
@Suite("Message marshalling without a bus")
struct MessageTests {
    func call() throws -> Message {
        try Message.methodCall(
            destination: "org.example.Test", path: "/a/b", interface: "org.example.Test", member: "M")
    }

    @Test("basic types round-trip")
    func basics() throws {
        let m = try call()
        var w = m.writer()
        w.append(UInt8(7))
        w.append(true)
        w.append(Int16(-3))
        w.append(UInt16(65000))
        w.append(Int32(-70000))
        w.append(UInt32.max)
        w.append(Int64.min)
        w.append(UInt64.max)
        w.append(3.25)
        w.append("héllo")
        try w.appendObjectPath("/x/y")
        try w.appendSignature("a{sv}")
        #expect(m.signature == "ybnqiuxtdsog")
        var r = m.reader()
        #expect(try r.read(UInt8.self) == 7)
        #expect(try r.read(Bool.self) == true)
        #expect(try r.read(Int16.self) == -3)
        #expect(try r.read(UInt16.self) == 65000)
        #expect(try r.read(Int32.self) == -70000)
        #expect(try r.read(UInt32.self) == .max)
        #expect(try r.read(Int64.self) == .min)
        #expect(try r.read(UInt64.self) == .max)
        #expect(try r.read(Double.self) == 3.25)
        #expect(try r.read(String.self) == "héllo")
        #expect(try r.readObjectPath() == "/x/y")
        #expect(try r.readSignature() == "a{sv}")
        let atEnd = r.isAtEnd()
        #expect(atEnd)
    }

    @Test("containers, variants, dicts and byte arrays round-trip as DBusValue")
    func containers() throws {
        let values: [DBusValue] = [
            .bytes([0, 1, 2, 255]),
            .bytes([]),
            .array(elementSignature: "s", []),
            .array(elementSignature: "(ssu)", [.structure([.string(":1.5"), .string("firefox"), .uint32(2)])]),
            .dict(
                keySignature: "s", valueSignature: "v",
                [
                    (.string("reload"), .variant(.bool(true))),
                    (.string("nested"), .variant(.variant(.array(elementSignature: "x", [.int64(-1), .int64(2)])))),
                ]),
            .dict(
                keySignature: "u", valueSignature: "as", [(.uint32(1), .array(elementSignature: "s", [.string("a")]))]),
            .variant(.objectPath("/org/example")),
        ]
        let m = try call()
        var w = m.writer()
        for v in values { try w.append(v) }
        #expect(m.signature == values.map(\.signature).joined())
        var r = m.reader()
        #expect(try r.readAll() == values)
    }

    @Test("a descriptor read as a generic value is closed, not leaked; readFD hands one out")
    func descriptorsInValues() throws {
        var fds: [Int32] = [-1, -1]
        #expect(pipe(&fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        func target(_ path: String) -> String {
            var buf = [CChar](repeating: 0, count: 256)
            let n = readlink(path, &buf, buf.count - 1)
            return n > 0 ? String(decoding: buf[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        }
        // Only descriptors of this test's own pipe are counted: tests run in parallel, and any
        // other test may open and close descriptors of its own meanwhile.
        let pipeName = target("/proc/self/fd/\(fds[0])")
        func openFDs() -> Int {
            guard let dir = opendir("/proc/self/fd") else { return -1 }
            defer { closedir(dir) }
            var n = 0
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) {
                    String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
                }
                if target("/proc/self/fd/" + name) == pipeName { n += 1 }
            }
            return n
        }
        let m = try call()
        var w = m.writer()
        try w.appendVardict(["hostile": .unixFD(fds[0])])
        try w.append(DBusValue.unixFD(fds[1]))
        let before = openFDs()
        for _ in 0..<50 {
            var r = m.reader()
            let options = try r.readVardict()
            #expect(options["hostile"] == .unixFD(-1))
            #expect(try r.readValue() == .unixFD(-1))
        }
        #expect(openFDs() == before, "no descriptor kept from 100 generic reads")
        var r = m.reader()
        _ = try r.readVardict()
        let taken = try r.readFD()
        #expect(taken >= 0 && fcntl(taken, F_GETFD) != -1)
        close(taken)
    }

    @Test("a{sv} reads as a dictionary")
    func vardict() throws {
        let m = try call()
        var w = m.writer()
        try w.appendVardict(["a": .uint32(1), "b": .string("x")])
        var r = m.reader()
        let d = try r.readVardict()
        #expect(d["a"] == .uint32(1))
        #expect(d["b"] == .string("x"))
    }

    @Test("reading the wrong type is InvalidArgs naming both types, not a crash")
    func wrongType() throws {
        let m = try call()
        var w = m.writer()
        w.append("text")
        var r = m.reader()
        let error = #expect(throws: DBusError.self) { try r.read(UInt32.self) }
        #expect(error?.name == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(error?.message == "Expected an argument of type 'u', got 's'")
        var empty = try call().reader()
        #expect(throws: DBusError.self) { try empty.read(String.self) }
        #expect(throws: DBusError.self) { try empty.readValue() }
    }

    @Test("invalid names, paths, signatures and mismatched elements are refused before libdbus sees them")
    func invalidInput() throws {
        #expect(throws: DBusError.self) {
            try Message.methodCall(destination: nil, path: "no-slash", interface: nil, member: "M")
        }
        #expect(throws: DBusError.self) {
            try Message.methodCall(destination: "bad..name", path: "/", interface: nil, member: "M")
        }
        #expect(throws: DBusError.self) {
            try Message.methodCall(destination: nil, path: "/", interface: "nodots", member: "M")
        }
        #expect(throws: DBusError.self) {
            try Message.methodCall(destination: nil, path: "/", interface: nil, member: "1bad")
        }
        #expect(throws: DBusError.self) { try Message.signal(path: "/a//b", interface: "a.b", member: "S") }
        let m = try call()
        var w = m.writer()
        #expect(throws: DBusError.self) { try w.appendObjectPath("/trailing/") }
        #expect(throws: DBusError.self) { try w.appendSignature("a{") }
        #expect(throws: DBusError.self) { try w.append(.array(elementSignature: "s", [.uint32(1)])) }
        #expect(throws: DBusError.self) { try w.append(.dict(keySignature: "v", valueSignature: "s", [])) }
        #expect(throws: DBusError.self) { try w.append(.structure([])) }
        #expect(throws: DBusError.self) { try w.appendFD(-1) }
        #expect(m.signature == "")
    }

    @Test("strings with NUL are cut at the NUL, as C would read them")
    func nulInString() throws {
        let m = try call()
        var w = m.writer()
        w.append("ab\u{0}cd")
        var r = m.reader()
        #expect(try r.read(String.self) == "ab")
    }

    @Test("error replies carry name and message; an invalid error name becomes Failed")
    func errors() throws {
        let m = try call()
        let e = m.makeError(.invalidArgs("Invalid icon name 'x'"))
        #expect(e.kind == .error)
        #expect(e.asError == DBusError.invalidArgs("Invalid icon name 'x'"))
        let bad = m.makeError(DBusError(name: "not an error name", message: "m"))
        #expect(bad.errorName == "org.freedesktop.DBus.Error.Failed")
        #expect(m.makeReturn().kind == .methodReturn)
    }

    @Test("file descriptors are attached as duplicates")
    func fds() throws {
        let m = try call()
        var w = m.writer()
        guard let (r0, w0) = makeLeasePipe() else {
            Issue.record("pipe")
            return
        }
        try w.appendFD(w0)
        var r = m.reader()
        let received = try r.readFD()
        #expect(received >= 0 && received != w0)
        for fd in [r0, w0, received] { _ = closeFD(fd) }
    }
}
