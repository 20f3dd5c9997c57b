// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import ArgumentParser
import LinuxKit
import NetActivityClient

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("Show the indicator's state, the activity and who holds it."))

    @OptionGroup var bus: BusOptions

    @Flag(help: ArgumentHelp(tr("Print one JSON object.")))
    var json = false

    @Flag(help: ArgumentHelp(tr("Escape the text for Pango markup (a notification body: notify-send).")))
    var markup = false

    func run() throws {
        let client = try bus.connect()
        let s = statusOrFail(client)
        if json {
            writeLine(Render.json(s))
            return
        }
        // Other apps' names and reasons are text, never markup, in a notification body.
        func out(_ line: String) { writeLine(markup ? DisplayText.markupEscaped(line) : line) }
        out("visible:     \(s.visible ? "yes" : "no")")
        out("state:       \(s.state)")
        out("activity:    \(s.activityCount)")
        out("enabled:     \(s.enabled ? "yes" : "no")")
        out(
            "delays:      activation \(formatSeconds(s.activationDelay)) s, completion \(formatSeconds(s.completionDelay)) s"
        )
        // Where downloads go: the proxy the latest one went through (an older agent has no such property).
        if let proxy = try? client.proxy(), !proxy.isEmpty { out("proxy:       \(proxy)") }
        if s.clients.isEmpty {
            out("clients:     none")
        } else {
            out("clients:")
            for c in s.clients {
                out("  \(c.busName)  \(c.processName.isEmpty ? "?" : safe(c.processName))  \(c.count)")
                for reason in c.reasons { out("      \(safe(reason))") }
            }
        }
    }
}
