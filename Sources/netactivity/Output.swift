// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import NetActivityClient

func printError(_ message: String) {
    writeAll(2, "netactivity: \(message)\n")
}

/// Writes a whole line straight to the fd: panels read line by line, so nothing may sit in a buffer.
func writeLine(_ line: String) {
    writeAll(1, line + "\n")
}

func writeAll(_ fd: Int32, _ s: String) {
    writeAll(fd, Array(s.utf8))
}

func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    var bytes = bytes
    var off = 0
    while off < bytes.count {
        let n = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + off, $0.count - off) }
        if n < 0 {
            if errno == EINTR { continue }
            // The reader went away (a panel restarted): nothing left to do.
            exit(errno == EPIPE ? 0 : 1)
        }
        off += n
    }
}

func jsonString(_ s: String) -> String {
    var out = "\""
    for u in s.unicodeScalars {
        switch u {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where isControl(u):
            let hex = String(u.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(u)
        }
    }
    return out + "\""
}

/// C0 controls, DEL and C1 controls (a terminal acts on all of them: ESC, CSI as U+009B, ...),
/// and the Unicode line and paragraph separators.
func isControl(_ u: Unicode.Scalar) -> Bool {
    u.value < 0x20 || (0x7F...0x9F).contains(u.value) || u.value == 0x2028 || u.value == 0x2029 || isBidiControl(u)
}

/// The bidirectional formatting characters (embeddings, overrides, isolates, marks): text from
/// another app could reorder what the terminal shows around it ("Trojan Source").
func isBidiControl(_ u: Unicode.Scalar) -> Bool {
    switch u.value {
    case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
    default: false
    }
}

/// A string that came from another app, made safe for a terminal and for scripts that split
/// lines: every control character becomes a visible escape (`\n`, `\x1b`, `\u{9b}`), and `\`
/// itself is doubled so an escape can never be faked.
func safe(_ s: String) -> String {
    guard s.unicodeScalars.contains(where: { isControl($0) || $0 == "\\" }) else { return s }
    var out = ""
    for u in s.unicodeScalars {
        switch u {
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where u.value < 0x80 && isControl(u):
            let hex = String(u.value, radix: 16)
            out += "\\x" + (hex.count < 2 ? "0" : "") + hex
        case _ where isControl(u): out += "\\u{" + String(u.value, radix: 16) + "}"
        default: out.unicodeScalars.append(u)
        }
    }
    return out
}

func formatSeconds(_ d: Double) -> String {
    var s = String(d)
    if s.hasSuffix(".0") { s.removeLast(2) }
    return s
}

enum Render {
    static func clientsSummary(_ s: ActivityStatus) -> String {
        // A tooltip people read: an app whose name is not known yet is "an app", never its bus name.
        s.clients.map { c in
            let row = "\(c.processName.isEmpty ? tr("an app") : safe(c.processName)) (\(c.count))"
            return c.reasons.isEmpty
                ? row : row + " — " + DisplayText.line(c.reasons.joined(separator: ", "), maxCharacters: 80)
        }.joined(separator: ", ")
    }

    /// `key=value` words; a client is `NAME(COUNT)`, NAME its process name, or its bus name (which
    /// holds colons) until the process is known.
    static func text(_ s: ActivityStatus?) -> String {
        guard let s else { return "agent=stopped visible=no" }
        let clients = s.clients.map { "\(safe($0.processName.isEmpty ? $0.busName : $0.processName))(\($0.count))" }
        return "visible=\(s.visible ? "yes" : "no") state=\(s.state) count=\(s.activityCount)"
            + " enabled=\(s.enabled ? "yes" : "no")"
            + (clients.isEmpty ? "" : " clients=" + clients.joined(separator: ","))
    }

    /// The JSON lines' schema version (docs/install.md, "netactivity watch --format json"): keys are
    /// only ever added; a key is never removed, renamed or given another type within a version.
    static let jsonSchema = 1

    /// Every line has every key, stopped or running; what a stopped agent cannot say is null.
    static func json(_ s: ActivityStatus?) -> String {
        guard let s else {
            return "{\"schema\":\(jsonSchema),\"running\":false,\"visible\":false,\"state\":\"stopped\","
                + "\"activity_count\":0,\"enabled\":null,\"activation_delay\":null,\"completion_delay\":null,"
                + "\"clients\":[]}"
        }
        let clients = s.clients.map {
            "{\"bus_name\":\(jsonString($0.busName)),\"process\":\(jsonString($0.processName)),\"count\":\($0.count),"
                + "\"reasons\":[\($0.reasons.map(jsonString).joined(separator: ","))]}"
        }
        return "{\"schema\":\(jsonSchema),\"running\":true,\"visible\":\(s.visible),\"state\":\(jsonString(s.state)),"
            + "\"activity_count\":\(s.activityCount),\"enabled\":\(s.enabled),"
            + "\"activation_delay\":\(s.activationDelay),\"completion_delay\":\(s.completionDelay),"
            + "\"clients\":[\(clients.joined(separator: ","))]}"
    }

    /// Waybar's custom module in `return-type: json` mode: an empty text hides the module.
    static func waybar(_ s: ActivityStatus?) -> String {
        guard let s else {
            return
                "{\"text\":\"\",\"tooltip\":\"netactivity agent is not running\",\"class\":\"stopped\",\"alt\":\"stopped\"}"
        }
        if s.visible {
            // Visible with a count of 0 is the completion delay: the indicator stays (no flicker
            // between transfers), but there is no number of busy clients to show.
            let tooltip =
                s.activityCount == 0
                ? tr("Network activity just ended")
                // TRANSLATORS: {1} lists the apps ("firefox (2), thunderbird (1)") or gives the count.
                : tr("Network activity: {1}", s.clients.isEmpty ? "\(s.activityCount)" : clientsSummary(s))
            // Waybar renders the tooltip as Pango markup: apps' names and reasons stay text.
            return "{\"text\":\(jsonString(barText(s))),\"tooltip\":\(jsonString(DisplayText.markupEscaped(tooltip))),"
                + "\"class\":\"active\",\"alt\":\"active\"}"
        }
        return "{\"text\":\"\",\"tooltip\":\"No network activity\",\"class\":\"idle\",\"alt\":\"idle\"}"
    }

    /// Polybar's `tail = true` script module: one line per change, empty when hidden.
    static func polybar(_ s: ActivityStatus?) -> String {
        guard let s, s.visible else { return "" }
        return barText(s)
    }

    /// "⇅ 3" while 3 are busy; "⇅" in the completion delay (visible, none busy).
    static func barText(_ s: ActivityStatus) -> String {
        s.activityCount == 0 ? "⇅" : "⇅ \(s.activityCount)"
    }
}

extension Render {
    /// 1536 -> "1.5 KiB"; 0 expected is unknown ("?").
    static func bytes(_ n: UInt64) -> String {
        if n < 1024 { return "\(n) B" }
        var value = Double(n)
        for unit in ["KiB", "MiB", "GiB", "TiB"] {
            value /= 1024
            if value < 1024 || unit == "TiB" {
                return (value < 10 ? String(Double(Int(value * 10)) / 10) : String(Int(value))) + " " + unit
            }
        }
        return "\(n) B"
    }

    /// "5.8 KiB/9.7 KiB", "1.0 MiB/?"; "-" when no byte was counted either way (a task measured
    /// in a fraction only, or not yet started).
    static func transfer(_ done: UInt64, _ expected: UInt64) -> String {
        done == 0 && expected == 0 ? "-" : "\(bytes(done))/\(expected == 0 ? "?" : bytes(expected))"
    }

    /// The task's number (the last part of its path).
    static func taskNumber(_ t: TaskSnapshot) -> String {
        String((t.path ?? "").split(separator: "/").last ?? "")
    }

    static func percent(_ t: TaskSnapshot) -> String {
        let known =
            t.countOfBytesExpectedToSend > 0 || t.countOfBytesExpectedToReceive > 0 || t.fractionCompleted > 0
            || t.state == .completed
        return known ? "\(Int((t.fractionCompleted * 100).rounded(.down)))%" : "-"
    }

    static func stateWithError(_ t: TaskSnapshot) -> String {
        t.error.isEmpty ? t.state.rawValue : "\(t.state.rawValue) (\(safe(t.error)))"
    }

    /// One line per task event for `watch --tasks`.
    static func taskLine(_ event: TaskEvent) -> String {
        switch event {
        case .added(let t): "added " + taskFields(t)
        case .changed(let t): "changed " + taskFields(t)
        case .removed(let path): "removed task=\(path.split(separator: "/").last ?? "")"
        }
    }

    static func taskFields(_ t: TaskSnapshot) -> String {
        "task=\(taskNumber(t)) state=\(t.state.rawValue) done=\(percent(t))"
            + " received=\(transfer(t.countOfBytesReceived, t.countOfBytesExpectedToReceive).replacing(" ", with: ""))"
            + " sent=\(transfer(t.countOfBytesSent, t.countOfBytesExpectedToSend).replacing(" ", with: ""))"
            + " owner=\(safe(t.owner))" + (t.error.isEmpty ? "" : " error=\(safe(t.error))")
            + " description=\(jsonString(t.description))"
    }

    static func taskJSON(_ event: TaskEvent) -> String {
        switch event {
        case .added(let t): taskJSON(t, event: "added")
        case .changed(let t): taskJSON(t, event: "changed")
        case .removed(let path): "{\"event\":\"removed\",\"path\":\(jsonString(path))}"
        }
    }

    static func taskJSON(_ t: TaskSnapshot, event: String? = nil) -> String {
        (event.map { "{\"event\":\(jsonString($0))," } ?? "{")
            + "\"path\":\(jsonString(t.path ?? "")),\"state\":\(jsonString(t.state.rawValue)),"
            + "\"description\":\(jsonString(t.description)),\"owner\":\(jsonString(t.owner)),"
            + "\"sent\":\(t.countOfBytesSent),\"expected_to_send\":\(t.countOfBytesExpectedToSend),"
            + "\"received\":\(t.countOfBytesReceived),\"expected_to_receive\":\(t.countOfBytesExpectedToReceive),"
            + "\"fraction_completed\":\(t.fractionCompleted),\"error\":\(jsonString(t.error))}"
    }
}
