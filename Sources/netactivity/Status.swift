import ArgumentParser
import LinuxKit
import NetActivityClient

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: tr("Show the indicator's state, the activity and who holds it."))

    @OptionGroup var bus: BusOptions

    @Flag(help: ArgumentHelp(tr("Print one JSON object.")))
    var json = false

    func run() throws {
        let client = try bus.connect()
        let s = statusOrFail(client)
        if json {
            writeLine(Render.json(s))
            return
        }
        writeLine("visible:     \(s.visible ? "yes" : "no")")
        writeLine("state:       \(s.state)")
        writeLine("activity:    \(s.activityCount)")
        writeLine("enabled:     \(s.enabled ? "yes" : "no")")
        writeLine("delays:      activation \(formatSeconds(s.activationDelay)) s, completion \(formatSeconds(s.completionDelay)) s")
        if s.clients.isEmpty {
            writeLine("clients:     none")
        } else {
            writeLine("clients:")
            for c in s.clients {
                writeLine("  \(c.busName)  \(c.processName.isEmpty ? "?" : safe(c.processName))  \(c.count)")
                for reason in c.reasons { writeLine("      \(safe(reason))") }
            }
        }
    }
}
