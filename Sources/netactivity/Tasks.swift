// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import ArgumentParser
import LinuxKit
import NetActivityClient
import NetActivityContract

struct Tasks: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("List the tasks the agent holds; ask a task's app to cancel, pause or resume it."),
        discussion: tr("Completed tasks stay listed for a few seconds. `watch --tasks` follows them as they change."),
        subcommands: [List.self, Cancel.self, Pause.self, Resume.self], defaultSubcommand: List.self)
}

/// `netactivity tasks [list]`.
struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("List the tasks the agent holds, with their progress (the default)."))

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

/// What `tasks cancel|pause|resume` name: a task's number (as `tasks` lists it) or its object path.
struct TaskRequestOptions: ParsableArguments {
    @OptionGroup var bus: BusOptions

    @Argument(help: ArgumentHelp(tr("The task: its number, as `netactivity tasks` lists it, or its object path.")))
    var task: String

    func validate() throws {
        guard path != nil else { throw ValidationError(tr("Not a task number or path: {1}", safe(task))) }
    }

    var path: String? {
        if task.hasPrefix(NetActivityBus.taskPathPrefix),
            UInt64(task.dropFirst(NetActivityBus.taskPathPrefix.count)) != nil
        {
            return task
        }
        return UInt64(task).map { NetActivityBus.taskPathPrefix + String($0) }
    }

    /// Asks the task's app; the app decides, so nothing is waited for.
    func ask(_ send: (BlockingNetActivity, String) throws(NetActivityError) -> Void) {
        do {
            try send(try bus.connect(), path!)
        } catch let error as NetActivityError {
            fail(error)
        } catch {
            fail("\(error)", code: 1)
        }
    }
}

struct Cancel: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("Ask a task's app to cancel it (for a task that offers it)."),
        discussion: tr(
            "The app decides: the task ends when the app ends it. A download of the agent's own stops at once."))
    @OptionGroup var request: TaskRequestOptions
    func run() throws { request.ask { client, path throws(NetActivityError) in try client.requestCancel(task: path) } }
}

struct Pause: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("Ask a task's app to pause it (for a task that offers it)."))
    @OptionGroup var request: TaskRequestOptions
    func run() throws {
        request.ask { client, path throws(NetActivityError) in try client.requestSuspend(task: path, suspended: true) }
    }
}

struct Resume: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("Ask a task's app to resume it (for a task that offers it)."))
    @OptionGroup var request: TaskRequestOptions
    func run() throws {
        request.ask { client, path throws(NetActivityError) in try client.requestSuspend(task: path, suspended: false) }
    }
}
