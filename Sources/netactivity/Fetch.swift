// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import ArgumentParser
import Glibc
import LinuxKit
import NetActivityClient

struct Fetch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("Download an image through the shared downloader (and cache) and write it out."),
        discussion: tr(
            "Shows a progress bar on stderr when stderr is a terminal. Exit status: 0 on success, 1 when the download failed (the agent's error is printed), 69 when the agent is not running, 73 when -o cannot be written."
        ))

    @OptionGroup var bus: BusOptions

    @Argument(help: ArgumentHelp(tr("An http or https URL."))) var url: String
    @Option(name: .short, help: ArgumentHelp(tr("Write to this file instead of stdout."))) var output: String?
    @Flag(help: ArgumentHelp(tr("Skip the caches and download again."))) var reload = false
    @Option(help: ArgumentHelp(tr("The additional identifier of the cache key (e.g. a size or a filter).")))
    var additionalIdentifier = ""

    func run() throws {
        let client = try bus.connect()
        let bar = ProgressBar(enabled: isatty(2) != 0)
        let file: SharedImageFile
        do {
            // One FetchImage; with a bar to draw, the transfer's task is published at once and followed.
            file = try client.fetch(
                url: url, additionalIdentifier: additionalIdentifier, reload: reload,
                progress: bar.enabled ? { received, expected in bar.show(received: received, expected: expected) } : nil
            )
        } catch {
            bar.finish()
            fail(
                error.isAgentNotRunning ? cliDescription(error) : "\(url): \(error.message) (\(error.name))",
                code: error.isAgentNotRunning ? 69 : 1)
        }
        bar.finish()
        let image = file.readAll()
        var out: Int32 = 1
        if let output {
            out = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard out >= 0 else {
                fail(tr("cannot write {1}: {2}", output, String(cString: strerror(errno))), code: 73)
            }
        }
        defer { if out != 1 { close(out) } }
        writeAll(out, image)
    }
}

/// A one-line progress bar on stderr: `[########------------]  40%  1.2 MiB / 3.0 MiB`.
final class ProgressBar {
    let enabled: Bool
    private var drawn = false
    init(enabled: Bool) { self.enabled = enabled }

    func show(received: UInt64, expected: UInt64) {
        guard enabled else { return }
        let width = 24
        var line = "\r"
        if expected > 0 {
            let fraction = min(1, Double(received) / Double(expected))
            let filled = Int(fraction * Double(width))
            line += "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "] "
            let percent = String(Int(fraction * 100))
            line +=
                String(repeating: " ", count: 3 - percent.count) + percent + "%  " + Render.bytes(received) + " / "
                + Render.bytes(expected)
        } else {
            line += Render.bytes(received)
        }
        writeAll(2, line + "\u{1B}[K")
        drawn = true
    }

    func finish() {
        if drawn { writeAll(2, "\n") }
        drawn = false
    }
}
