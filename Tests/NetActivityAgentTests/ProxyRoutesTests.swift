// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import LinuxKit
import Logging
import NetActivityContract
import NetActivityCore
import Testing

@testable import NetActivityAgent

/// Which proxy each request goes through, and what a sandboxed app's request through one may name.
/// Routing only: the addresses below are decided on, never connected to (no socket is opened).
@Suite("Proxy routes")
struct ProxyRoutesTests {
    let loop = EventLoop()

    func routes(_ environment: [String: String]) -> ProxyRoutes {
        ProxyRoutes(
            loop: loop, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
            environment: environment, library: "libnetactivity-missing-gio.so.0")
    }

    /// Routes `url` and runs the loop until the answer; whether it came at once (within the call).
    func route(_ routes: ProxyRoutes, _ url: String, reach: NetworkReach? = nil) -> (
        Result<ProxyRoutes.Route, NetActivityError>, atOnce: Bool
    ) {
        var answer: Result<ProxyRoutes.Route, NetActivityError>?
        var inCall = true
        _ = routes.route(url: url, reach: reach) { result in
            answer = result
            if !inCall { loop.stop() }
        }
        inCall = false
        let atOnce = answer != nil
        if answer == nil { loop.run() }
        return (answer!, atOnce)
    }

    @Test("the environment's proxy is answered at once, no_proxy hosts go direct, and Proxy shows no credentials")
    func environment() throws {
        let r = routes(["http_proxy": "http://u:secret@proxy.lan:3128", "no_proxy": ".school.lan"])
        let (through, atOnce) = route(r, "http://images.example.org/a.png")
        #expect(atOnce)
        #expect(try through.get().proxy == "http://u:secret@proxy.lan:3128", "libcurl gets the credentials")
        #expect(r.latest == "http://proxy.lan:3128")
        #expect(try route(r, "http://wiki.school.lan/logo.png").0.get().proxy == nil)
        #expect(r.latest == "direct")
    }

    @Test("a sandboxed app's URL through a proxy may not name this machine or a local network")
    func reach() throws {
        let r = routes(["http_proxy": "http://127.0.0.1:3128"])
        for url in [
            "http://127.0.0.1/x.png", "http://[::1]:8080/x.png", "http://10.1.2.3/x.png", "http://localhost/x.png",
            "http://printer.localhost/x.png",
        ] {
            guard case .failure(let error) = route(r, url, reach: NetworkReach()).0 else {
                Issue.record("\(url) was let through")
                continue
            }
            #expect(error.name == NetActivityError.Name.accessDenied.rawValue)
            #expect(error.message.contains("through the proxy http://127.0.0.1:3128"), "\(error.message)")
        }
        // A public address, and a name this machine does not resolve (the proxy's to serve; an
        // .invalid name is never asked of a resolver, so this test sends nothing anywhere).
        #expect(try route(r, "http://93.184.215.14/x.png", reach: NetworkReach()).0.get().proxy != nil)
        #expect(try route(r, "http://images.netactivity.invalid/x.png", reach: NetworkReach()).0.get().proxy != nil)
        // The settings may let a range through.
        let lan = NetworkReach(allowed: [NetworkRange("10.0.0.0/8"[...])!])
        #expect(try route(r, "http://10.1.2.3/x.png", reach: lan).0.get().proxy != nil)
    }

    @Test("without GIO every request goes direct, and that answer is kept: the next is answered at once")
    func noResolver() throws {
        let r = routes([:])
        let (first, atOnce) = route(r, "http://images.example.org/a.png")
        #expect(!atOnce, "looked up on a worker thread")
        #expect(try first.get().proxy == nil)
        let (again, second) = route(r, "http://images.example.org/b.png")
        #expect(second)
        #expect(try again.get().proxy == nil)
        r.forget()
        #expect(!route(r, "http://images.example.org/c.png").atOnce, "looked up again after a settings change")
    }
}
