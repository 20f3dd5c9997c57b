// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import ArgumentParser
import LinuxKit
import NetActivityClient

struct Accounts: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("Show what apps make the agent hold, by budget."),
        discussion: tr(
            "For each app and budget: what it holds, its share now, the budget past which apps are held to their shares, and the limit. Host apps only."
        ))

    @OptionGroup var bus: BusOptions

    @Argument(
        help: ArgumentHelp(
            tr(
                "An app (app:org.gnome.Terminal, flatpak:org.example.App, unscoped); every app holding anything when left out."
            )))
    var app: String?

    @Flag(help: ArgumentHelp(tr("Print one JSON object per line.")))
    var json = false

    func run() throws {
        let client = try bus.connect()
        let rows: [BlockingNetActivity.AccountRow]
        do { rows = try client.accounts(of: app ?? "") } catch { fail(error) }
        if json {
            for r in rows {
                writeLine(
                    "{\"app\":\(jsonString(r.app)),\"resource\":\(jsonString(r.resource)),\"held\":\(r.held),"
                        + "\"share\":\(r.share),\"budget\":\(r.budget),\"limit\":\(r.limit)}")
            }
            return
        }
        guard !rows.isEmpty else {
            writeLine(tr("No app holds anything."))
            return
        }
        let width = max(24, rows.map { safe($0.app).count + 2 }.max() ?? 0)
        writeLine(
            "APP".padded(to: width) + "RESOURCE".padded(to: 17) + Self.columns("HELD", "SHARE", "BUDGET", "LIMIT"))
        for r in rows {
            // Bytes read best in their units; counts as they are.
            let figure = Self.isBytes(r.resource) ? Render.bytes : { String($0) }
            writeLine(
                safe(r.app).padded(to: width) + safe(r.resource).padded(to: 17)
                    + Self.columns(figure(r.held), figure(r.share), figure(r.budget), figure(r.limit)))
        }
    }

    static func isBytes(_ resource: String) -> Bool {
        switch ActivityMember.Resource(rawValue: resource) {
        case .bytesInFlight, .images, .pixels, .disk: true
        default: false
        }
    }

    static func columns(_ values: String...) -> String {
        values.map { String(repeating: " ", count: max(1, 11 - $0.count)) + $0 }.joined()
    }
}
