import ArgumentParser
import NetActivityClient

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print one line per change of the indicator, for panels and scripts.",
        discussion: """
            Prints the current state at once, then a line whenever it changes (never the same line \
            twice; no polling). While the agent is not running it prints the stopped state and \
            waits for it, so a panel module survives agent restarts.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, json, waybar, polybar
    }

    @OptionGroup var bus: BusOptions

    @Option(help: "Output format: \(Format.allCases.map(\.rawValue).joined(separator: ", ")).")
    var format: Format = .text

    func run() throws {
        let client = try bus.connect()
        let render: (ActivityStatus?) -> String = switch format {
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
