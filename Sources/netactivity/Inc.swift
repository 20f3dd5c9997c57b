// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import ArgumentParser
import Glibc
import LinuxKit
import NetActivityClient

struct Inc: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("Hold one activity count until interrupted, `netactivity dec`, or --seconds."),
        discussion: tr(
            "Counts belong to the bus client that made them and end when it exits, so `inc` stays running while it holds its count: `netactivity inc & ...; netactivity dec`."
        ))

    @OptionGroup var bus: BusOptions

    @Option(help: ArgumentHelp(tr("Release the count after this many seconds.")))
    var seconds: Double?

    func validate() throws {
        if let seconds, !(seconds.isFinite && seconds >= 0) {
            throw ValidationError("--seconds must be a non-negative number, got \(seconds)")
        }
    }

    func run() throws {
        let client = try bus.connect()
        let signals = TerminationSignals()
        do {
            try client.incrementActivityCount()
        } catch {
            fail(error)
        }
        signals.wait(seconds: seconds)
        try? client.decrementActivityCount()
    }
}

/// Blocks SIGINT, SIGTERM and SIGHUP so they can be waited for in order to clean up.
struct TerminationSignals {
    private var signalSet = sigset_t()

    init(includeChild: Bool = false) {
        sigemptyset(&signalSet)
        for s in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&signalSet, s) }
        if includeChild { sigaddset(&signalSet, SIGCHLD) }
        pthread_sigmask(SIG_BLOCK, &signalSet, nil)
    }

    /// Waits for a termination signal, or `seconds` (forever when nil). Returns the signal, 0 on timeout.
    @discardableResult
    func wait(seconds: Double? = nil) -> Int32 {
        var set = signalSet
        while true {
            if let seconds {
                var ts = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
                let s = sigtimedwait(&set, nil, &ts)
                if s < 0, errno == EINTR { continue }
                return max(s, 0)
            }
            var sig: Int32 = 0
            if sigwait(&set, &sig) == 0 { return sig }
        }
    }

    var mask: sigset_t { signalSet }
}
