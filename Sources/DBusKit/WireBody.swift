// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus
import Glibc

/// A message body marshalled here, in D-Bus wire format, instead of through libdbus's iterators.
///
/// libdbus rewrites the header's SIGNATURE field after every top-level argument (a walk and a
/// re-marshal of the whole header, about 12,000 instructions each: a five-argument signal paid
/// 60,000 for it) and checks each variant's signature with a validator that allocates a list
/// node per character. Appending the bytes here and handing libdbus the whole message once
/// (`Message.finishWire`, through `dbus_message_demarshal`) costs a third of that for a typical
/// signal. libdbus still validates the result in full, as it does every message it reads, so
/// a mistake here is a dropped message, never a malformed one on the bus.
///
/// Little-endian hosts only (the body is written in host order, and libdbus's headers are too).
/// One thread builds a message, by accesses that never overlap: the runtime's exclusivity checks
/// (about a tenth of a signal's cost here) are off for its state.
final class WireBody {
    /// The body so far. Offsets are from the body's start, which the header pads to 8.
    @exclusivity(unchecked) var bytes: [UInt8] = []
    /// The top-level signature (and that of top-level structs), as appended.
    @exclusivity(unchecked) var signature: [UInt8] = []
    /// Open arrays and variants: inside them the container's own signature describes the values.
    @exclusivity(unchecked) var untracked = 0
    /// Open containers of any kind (a file descriptor can only be added outside all of them).
    @exclusivity(unchecked) var depth = 0
    /// The longest array so far, in bytes (the bus drops a sender whose array passes 64 MiB).
    @exclusivity(unchecked) var longestArray = 0

    init() { bytes.reserveCapacity(256) }

    /// Set when the body went to libdbus: a writer that appends after that has lost its bytes.
    @exclusivity(unchecked) var handedOver = false

    @inline(__always)
    func note(_ code: UInt8) {
        assert(!handedOver, "appended to a message body already handed to libdbus")
        if untracked == 0 { signature.append(code) }
    }

    @inline(__always)
    func pad(to alignment: Int) {
        let over = bytes.count & (alignment - 1)
        if over != 0 { bytes.append(contentsOf: repeatElement(0, count: alignment - over)) }
    }

    @inline(__always)
    func putU32(_ v: UInt32) { Self.append(v, to: &bytes) }

    /// `v`'s four bytes, little-endian, at the end of `out`.
    @inline(__always)
    static func append(_ v: UInt32, to out: inout [UInt8]) {
        withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
    }

    /// `v`'s four bytes, little-endian, over `out[offset..<offset + 4]` (a length known only later).
    @inline(__always)
    static func set(_ v: UInt32, at offset: Int, in out: inout [UInt8]) {
        withUnsafeBytes(of: v.littleEndian) { out.replaceSubrange(offset..<(offset + 4), with: $0) }
    }

    /// A fixed-size value (its bytes in host order, little-endian here), aligned to its size.
    @inline(__always)
    func putFixed<T>(_ v: T, code: UInt8) {
        note(code)
        pad(to: MemoryLayout<T>.size)
        withUnsafeBytes(of: v) { bytes.append(contentsOf: $0) }
    }

    /// A string (`s`) or object path (`o`): length, bytes, NUL. Cut at an embedded NUL, as the
    /// C string libdbus would have been given.
    func putString(_ s: String, code: UInt8) {
        note(code)
        pad(to: 4)
        var s = s
        s.withUTF8 { utf8 in
            let n = utf8.firstIndex(of: 0) ?? utf8.count
            putU32(UInt32(n))
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[..<n]))
        }
        bytes.append(0)
    }

    /// A signature (`g`): one length byte, bytes, NUL (the caller has checked it).
    func putSignature(_ s: String) {
        note(UInt8(ascii: "g"))
        putSignatureBytes(Array(s.utf8))
    }

    func putSignatureBytes(_ sig: [UInt8]) {
        bytes.append(UInt8(truncatingIfNeeded: sig.count))
        bytes.append(contentsOf: sig)
        bytes.append(0)
    }

    /// The alignment of a value whose signature starts with `code`.
    static func alignment(of code: UInt8) -> Int {
        switch code {
        case UInt8(ascii: "y"), UInt8(ascii: "g"), UInt8(ascii: "v"): 1
        case UInt8(ascii: "n"), UInt8(ascii: "q"): 2
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "("), UInt8(ascii: "{"): 8
        default: 4
        }
    }

    /// Where a container began, to put things back when its body throws.
    struct Mark {
        let bytes: Int
        let signature: Int
        let untracked: Int
        let depth: Int
    }

    var mark: Mark { Mark(bytes: bytes.count, signature: signature.count, untracked: untracked, depth: depth) }

    func rollBack(to mark: Mark) {
        bytes.removeSubrange(mark.bytes...)
        signature.removeSubrange(mark.signature...)
        untracked = mark.untracked
        depth = mark.depth
    }

    /// A signal's fixed header and fields as libdbus lays them out (PATH, INTERFACE, MEMBER,
    /// DESTINATION; no reply expected), for `message(header:)`. The names were checked already.
    static func signalHeader(path: String, interface: String, member: String, destination: String?) -> [UInt8] {
        var h: [UInt8] = [UInt8(ascii: "l"), 4, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        h.reserveCapacity(
            64 + path.utf8.count + interface.utf8.count + member.utf8.count + (destination?.utf8.count ?? 0))
        func field(_ code: UInt8, _ type: UInt8, _ value: String) {
            while h.count % 8 != 0 { h.append(0) }
            h.append(contentsOf: [code, 1, type, 0])
            append(UInt32(value.utf8.count), to: &h)
            h.append(contentsOf: value.utf8)
            h.append(0)
        }
        field(1, UInt8(ascii: "o"), path)
        field(2, UInt8(ascii: "s"), interface)
        field(3, UInt8(ascii: "s"), member)
        if let destination { field(6, UInt8(ascii: "s"), destination) }
        set(UInt32(h.count - 16), at: 12, in: &h)
        return h
    }

    /// The whole message: `header` (a marshalled libdbus message with an empty body and no
    /// SIGNATURE field) with this body and its signature added; nil when the header is not one.
    func message(header: UnsafeRawBufferPointer) -> [UInt8]? {
        guard header.count >= 16, header[0] == UInt8(ascii: "l"), signature.count < 256, bytes.count <= Int(UInt32.max)
        else { return nil }
        let fieldsLength = Int(header.loadUnaligned(fromByteOffset: 12, as: UInt32.self).littleEndian)
        guard 16 + fieldsLength <= header.count else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(16 + fieldsLength + 16 + signature.count + bytes.count)
        out.append(contentsOf: header[0..<(16 + fieldsLength)])
        if !bytes.isEmpty {
            while out.count % 8 != 0 { out.append(0) }
            out.append(contentsOf: [8, 1, UInt8(ascii: "g"), 0])  // SIGNATURE, a variant of "g"
            out.append(UInt8(signature.count))
            out.append(contentsOf: signature)
            out.append(0)
        }
        let fields = UInt32(out.count - 16)
        while out.count % 8 != 0 { out.append(0) }
        Self.set(UInt32(bytes.count), at: 4, in: &out)
        Self.set(fields, at: 12, in: &out)
        // A serial of 0 is invalid on the wire; the copy made after loading gets 0 again, for
        // the connection to number.
        if out[8] == 0, out[9] == 0, out[10] == 0, out[11] == 0 { out[8] = 1 }
        out.append(contentsOf: bytes)
        return out
    }
}
