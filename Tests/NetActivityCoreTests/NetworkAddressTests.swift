// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

/// Which addresses a sandboxed app's download may reach (public ones), in every textual and
/// embedded form an attacker could use to name this machine or a local network.
@Suite("Network reach")
struct NetworkAddressTests {
    @Test(
        "loopback, private, link-local, shared, unspecified, multicast and reserved addresses are not public",
        arguments: [
            "127.0.0.1", "127.9.8.7", "0.0.0.0", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
            "100.64.0.1", "100.127.255.254", "169.254.169.254", "224.0.0.1", "255.255.255.255", "240.0.0.1",
            "192.0.2.1", "198.18.0.1", "::1", "::", "fe80::1", "fe80::1%eth0", "fc00::1", "fd12:3456::1", "ff02::1",
            "::ffff:127.0.0.1", "::ffff:7f00:1", "::127.0.0.1", "64:ff9b::10.0.0.1", "2002:c0a8:0101::1",
            "::ffff:192.168.0.1", "2001:db8::1", "fec0::1",
        ])
    func notPublic(_ text: String) throws {
        let address = try #require(NetworkAddress(text[...]), "parses")
        #expect(address.nonPublicKind != nil, "\(text)")
        #expect(NetworkReach().refusal(address) != nil)
    }

    @Test(
        "public addresses are",
        arguments: ["93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1", "::ffff:1.1.1.1"])
    func isPublic(_ text: String) throws {
        let address = try #require(NetworkAddress(text[...]))
        #expect(address.nonPublicKind == nil, "\(text)")
    }

    @Test(
        "malformed text is no address",
        arguments: ["", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1:2:3", "1::2::3", "x::1", "12345::"])
    func malformed(_ text: String) {
        #expect(NetworkAddress(text[...]) == nil)
    }

    @Test("ranges the settings name are let through, and only those")
    func ranges() throws {
        let reach = NetworkReach(allowed: [
            try #require(NetworkRange("192.168.10.0/24")), try #require(NetworkRange("::1")),
        ])
        #expect(reach.refusal(try #require(NetworkAddress("192.168.10.7"))) == nil)
        #expect(reach.refusal(try #require(NetworkAddress("::ffff:192.168.10.7"))) == nil)
        #expect(reach.refusal(try #require(NetworkAddress("192.168.11.7"))) == "a private address")
        #expect(reach.refusal(try #require(NetworkAddress("::1"))) == nil)
        #expect(reach.refusal(try #require(NetworkAddress("127.0.0.1"))) == "a loopback address")
        #expect(NetworkRange("10.0.0.0/33") == nil)
        #expect(NetworkRange("10.0.0.0/8")?.contains(try #require(NetworkAddress("10.255.0.1"))) == true)
    }

    @Test("a Flatpak may use the network only when its .flatpak-info shares it")
    func flatpakNetwork() {
        let app = "[Application]\nname=org.example.App\n"
        #expect(AppIdentity.flatpakSharesNetwork(info: app + "[Context]\nshared=network;ipc;\n"))
        #expect(!AppIdentity.flatpakSharesNetwork(info: app + "[Context]\nshared=ipc;\n"))
        #expect(!AppIdentity.flatpakSharesNetwork(info: app))
        #expect(!AppIdentity.flatpakSharesNetwork(info: app + "[Instance]\nshared=network;\n"))
        let identity = AppIdentity.identify(
            pid: 1, uid: 1000, cgroup: "", flatpakInfo: app + "[Context]\nshared=ipc;\n")
        #expect(identity.isSandboxed && !identity.mayUseNetwork)
    }
}
