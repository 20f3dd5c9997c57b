// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import ArgumentParser
import LinuxKit
import NetActivityClient

struct Tasks: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("List the tasks the agent holds, with their progress."),
        discussion: tr("Completed tasks stay listed for a few seconds. `watch --tasks` follows them as they change."))

    @OptionGroup var bus: BusOptions

    @Flag(help: ArgumentHelp(tr("Print a JSON array.")))
    var json = false

    func run() throws {
        let client = try bus.connect()
        let tasks: [TaskSnapshot]
        do {
            tasks = try client.tasks()
        } catch {
            fail(error)
        }
        if json {
            writeLine("[" + tasks.map { Render.taskJSON($0) }.joined(separator: ",") + "]")
            return
        }
        guard !tasks.isEmpty else {
            writeLine(tr("no tasks"))
            return
        }
        var processes: [String: String] = [:]
        let rows = tasks.map { t -> [String] in
            if processes[t.owner] == nil { processes[t.owner] = client.processName(of: t.owner) }
            // Owners, process names and descriptions come from other apps: escaped for the terminal.
            let owner = safe(processes[t.owner].map { $0.isEmpty ? t.owner : "\(t.owner) (\($0))" } ?? t.owner)
            return [
                Render.taskNumber(t), Render.stateWithError(t), Render.percent(t),
                Render.transfer(t.countOfBytesReceived, t.countOfBytesExpectedToReceive),
                Render.transfer(t.countOfBytesSent, t.countOfBytesExpectedToSend), owner, safe(t.description),
            ]
        }
        let header = ["TASK", "STATE", "DONE", "RECEIVED", "SENT", "OWNER", "DESCRIPTION"]
        let widths = (0..<header.count - 1).map { i in ([header] + rows).map { $0[i].count }.max() ?? 0 }
        for row in [header] + rows {
            var line = ""
            for (i, cell) in row.enumerated() {
                line += i < widths.count ? cell + String(repeating: " ", count: widths[i] + 2 - cell.count) : cell
            }
            writeLine(line)
        }
    }
}
