// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import ArgumentParser
import LinuxKit
import NetActivityClient

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("Print one line per change of the indicator, for panels and scripts."),
        discussion: tr(
            "Prints the current state at once, then a line whenever it changes (never the same line twice; no polling). While the agent is not running it prints the stopped state and waits for it, so a panel module survives agent restarts (and a bus that comes back)."
        ))

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, json, waybar, polybar
    }

    @OptionGroup var bus: BusOptions

    @Option(help: ArgumentHelp(tr("Output format: {1}.", Format.allCases.map(\.rawValue).joined(separator: ", "))))
    var format: Format = .text

    @Flag(
        help: ArgumentHelp(
            tr("Follow tasks instead of the indicator: one line per task added, changed or removed (text or json).")))
    var tasks = false

    func validate() throws {
        if tasks, format != .text, format != .json {
            throw ValidationError("--tasks prints text or json lines, not \(format.rawValue)")
        }
    }

    func run() throws {
        let client = try bus.connect()
        if tasks {
            let render = format == .json ? Render.taskJSON : Render.taskLine
            do {
                try client.watchTasks { event in
                    writeLine(render(event))
                    return true
                }
            } catch {
                fail(error)
            }
            return
        }
        let render: (ActivityStatus?) -> String =
            switch format {
            case .text: Render.text
            case .json: Render.json
            case .waybar: Render.waybar
            case .polybar: Render.polybar
            }
        var last: String?
        do {
            try client.watch { status in
                let line = render(status)
                if line != last {
                    writeLine(line)
                    last = line
                }
                return true
            }
        } catch {
            fail(error)
        }
    }
}
