// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import ArgumentParser
import LinuxKit
import NetActivityClient
import NetActivityContract

@main
struct Netactivity: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "netactivity",
        abstract: tr("Talk to the netactivity agent: show and follow the network-activity indicator, hold activity."),
        discussion: tr(
            "Exit status: 0 on success, 64 for usage errors, 69 when the agent is not running (except `run`, which still runs the command, and `watch`, which waits for the agent)."
        ),
        version: NetActivityRelease.version,
        subcommands: [
            Status.self, Watch.self, Tasks.self, Inc.self, Dec.self, Run.self, Cache.self, Fetch.self, Accounts.self,
        ])

    /// Messages in the user's language (gettext), then ArgumentParser's own `main`.
    static func main() {
        Localization.start()
        main(nil)
    }
}

/// Options every subcommand shares.
struct BusOptions: ParsableArguments {
    @Option(help: ArgumentHelp(tr("Bus address to use instead of the session bus.")))
    var address: String?

    func connect() throws -> BlockingNetActivity {
        do {
            return try BlockingNetActivity(address: address)
        } catch {
            fail(tr("cannot connect to the bus: {1}", error.message), code: 69)
        }
    }
}

/// Prints `message` to stderr as `netactivity: message` and exits with `code`.
func fail(_ message: String, code: Int32) -> Never {
    printError(message)
    Netactivity.exit(withError: ExitCode(code))
}

/// The agent's errors, as the CLI reports them (69 when it is not running).
func fail(_ error: NetActivityError) -> Never {
    fail(cliDescription(error), code: error.isAgentNotRunning ? 69 : 1)
}

/// The error as a shell user reads it: with how to start the agent when it is not running.
func cliDescription(_ error: NetActivityError) -> String {
    error.isAgentNotRunning
        ? tr("the netactivity agent is not running on this bus (start it with `netactivityd`)") : error.description
}

/// The agent's status, or exit with the agent's error.
func statusOrFail(_ client: BlockingNetActivity) -> ActivityStatus {
    do {
        return try client.status()
    } catch {
        fail(error)
    }
}
