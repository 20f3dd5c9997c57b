// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import ArgumentParser
import Glibc
import LinuxKit
import NetActivityClient

struct Dec: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("Release the count of the newest `netactivity inc` on this bus."),
        discussion: tr(
            "Never goes below zero: with no `inc` holding a count there is nothing to do, which is not an error (exit 0, with a note on stderr)."
        ))

    @OptionGroup var bus: BusOptions

    func run() throws {
        let client = try bus.connect()
        let status = statusOrFail(client)
        // The newest holder has the highest unique-name serial (":1.N").
        let holders = status.clients.filter { $0.processName == "netactivity" }
            .compactMap { c -> (serial: Int, pid: UInt32)? in
                guard let serial = Int(c.busName.split(separator: ".").last ?? ""),
                    let pid = try? client.processID(of: c.busName), isIncHolder(pid: pid)
                else { return nil }
                return (serial, pid)
            }
        guard let newest = holders.max(by: { $0.serial < $1.serial }) else {
            printError(tr("no `netactivity inc` holds a count; nothing to decrement"))
            return
        }
        kill(pid_t(newest.pid), SIGTERM)
        // Return once the count is gone, so `dec; status` shows the result.
        for _ in 0..<200 where kill(pid_t(newest.pid), 0) == 0 { usleep(10_000) }
    }

    /// Whether `pid` is a `netactivity inc` of ours (its argv[1] is "inc").
    private func isIncHolder(pid: UInt32) -> Bool {
        let fd = open("/proc/\(pid)/cmdline", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = read(fd, &buf, buf.count)
        guard n > 0 else { return false }
        let args = buf[0..<n].split(separator: 0, omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
        return args.count > 1 && args[1] == "inc"
    }
}
