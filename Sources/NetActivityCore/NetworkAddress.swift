// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// Which addresses a sandboxed or unknown caller's download may connect to: public ones only. A
/// sandbox's network reach is its own, so the agent must not connect for it to this machine
/// (loopback), to the local link, to private networks (RFC 1918, carrier-grade NAT, unique local
/// IPv6), to unspecified, multicast, broadcast or reserved addresses, nor to any of these hidden in
/// an IPv6 form (IPv4-mapped, IPv4-compatible, NAT64, 6to4). Ranges the user's settings name
/// (`sandboxed-local-networks`) are let through.
public struct NetworkAddress: Hashable, Sendable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 (IPv6), in network order.
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// A dotted IPv4 address (four decimal parts) or an IPv6 one (RFC 4291 text, `::`, a dotted tail).
    public init?(_ text: Substring) {
        if let v4 = Self.parseIPv4(text) {
            bytes = v4
        } else if let v6 = Self.parseIPv6(text) {
            bytes = v6
        } else {
            return nil
        }
    }

    public var description: String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }

    /// The IPv4 address an IPv6 one carries, in the forms that reach IPv4 hosts: IPv4-mapped
    /// (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::/96`), 6to4 (`2002::/16`).
    public var embeddedIPv4: NetworkAddress? {
        guard bytes.count == 16 else { return nil }
        let zeros10 = bytes[0..<10].allSatisfy { $0 == 0 }
        if zeros10, bytes[10] == 0xFF, bytes[11] == 0xFF { return NetworkAddress(bytes: Array(bytes[12..<16])) }
        if zeros10, bytes[10] == 0, bytes[11] == 0, bytes[12..<16].contains(where: { $0 != 0 }),
            !(bytes[12..<15].allSatisfy { $0 == 0 } && bytes[15] == 1)
        {
            return NetworkAddress(bytes: Array(bytes[12..<16]))
        }
        if bytes[0..<12] == [0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] {
            return NetworkAddress(bytes: Array(bytes[12..<16]))
        }
        if bytes[0] == 0x20, bytes[1] == 0x02 { return NetworkAddress(bytes: Array(bytes[2..<6])) }
        return nil
    }

    /// Why a sandboxed app's download may not connect here (nil: a public address).
    public var nonPublicKind: String? {
        if let v4 = embeddedIPv4 { return v4.nonPublicKind }
        let b = bytes
        if b.count == 4 {
            switch (b[0], b[1]) {
            case (0, _): return "an unspecified address"
            case (127, _): return "a loopback address"
            case (10, _), (172, 16...31), (192, 168): return "a private address"
            case (100, 64...127): return "a shared (carrier-grade NAT) address"
            case (169, 254): return "a link-local address"
            case (192, 0) where b[2] == 0 || b[2] == 2: return "a reserved address"
            case (198, 18...19): return "a reserved address"
            case (198, 51) where b[2] == 100, (203, 0) where b[2] == 113: return "a reserved address"
            case (224...239, _): return "a multicast address"
            case (240...255, _): return "a reserved or broadcast address"
            default: return nil
            }
        }
        if b.allSatisfy({ $0 == 0 }) { return "an unspecified address" }
        if b[0..<15].allSatisfy({ $0 == 0 }), b[15] == 1 { return "a loopback address" }
        if b[0] == 0xFE, b[1] & 0xC0 == 0x80 { return "a link-local address" }
        if b[0] == 0xFE, b[1] & 0xC0 == 0xC0 { return "a site-local address" }
        if b[0] & 0xFE == 0xFC { return "a unique local (private) address" }
        if b[0] == 0xFF { return "a multicast address" }
        if b[0] == 0x20, b[1] == 0x01, b[2] == 0x0D, b[3] == 0xB8 { return "a reserved address" }
        if b[0..<12].allSatisfy({ $0 == 0 }) { return "a reserved address" }
        return nil
    }

    private static func parseIPv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var out: [UInt8] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy({ $0.isASCII && $0.isNumber }),
                let n = UInt16(part), n <= 255
            else { return nil }
            out.append(UInt8(n))
        }
        return out
    }

    private static func parseIPv6(_ text: Substring) -> [UInt8]? {
        var text = text
        if let percent = text.firstIndex(of: "%") { text = text[..<percent] }  // a zone: fe80::1%eth0
        guard text.contains(":"), text.count <= 45 else { return nil }
        let halves = text.split(separator: "::", maxSplits: 1, omittingEmptySubsequences: false)
        guard halves.count <= 2, !(halves.count == 1 && text.contains("::")) else { return nil }
        func groups(_ part: Substring) -> [UInt8]? {
            guard !part.isEmpty else { return [] }
            var out: [UInt8] = []
            let fields = part.split(separator: ":", omittingEmptySubsequences: false)
            for (i, field) in fields.enumerated() {
                if i == fields.count - 1, field.contains(".") {
                    guard let v4 = parseIPv4(field) else { return nil }
                    out += v4
                    continue
                }
                guard !field.isEmpty, field.count <= 4, let n = UInt16(field, radix: 16) else { return nil }
                out += [UInt8(n >> 8), UInt8(n & 0xFF)]
            }
            return out
        }
        guard let head = groups(halves[0]) else { return nil }
        if halves.count == 1 { return head.count == 16 ? head : nil }
        guard let tail = groups(halves[1]), head.count + tail.count <= 14 else { return nil }
        return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
    }
}

/// A range of addresses, `ADDRESS/PREFIX` (or one address): the settings' exceptions.
public struct NetworkRange: Hashable, Sendable, CustomStringConvertible {
    public let address: NetworkAddress
    public let prefix: Int

    public init?(_ text: Substring) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = NetworkAddress(parts[0]) else { return nil }
        let bits = address.bytes.count * 8
        if parts.count == 2 {
            guard let n = Int(parts[1]), (0...bits).contains(n) else { return nil }
            prefix = n
        } else {
            prefix = bits
        }
        self.address = address
    }

    public func contains(_ other: NetworkAddress) -> Bool {
        let candidate = other.bytes.count == address.bytes.count ? other : other.embeddedIPv4
        guard let candidate, candidate.bytes.count == address.bytes.count else { return false }
        var left = prefix
        for (a, b) in zip(address.bytes, candidate.bytes) where left > 0 {
            let mask: UInt8 = left >= 8 ? 0xFF : ~(0xFF >> UInt8(left))
            guard a & mask == b & mask else { return false }
            left -= 8
        }
        return true
    }

    public var description: String { "\(address)/\(prefix)" }
}

/// What a restricted transfer may connect to: public addresses, and the ranges given.
public struct NetworkReach: Equatable, Sendable {
    public var allowed: [NetworkRange]
    public init(allowed: [NetworkRange] = []) { self.allowed = allowed }

    /// Why `address` may not be connected to (nil: it may).
    public func refusal(_ address: NetworkAddress) -> String? {
        guard let kind = address.nonPublicKind, !allowed.contains(where: { $0.contains(address) }) else { return nil }
        return kind
    }
}
