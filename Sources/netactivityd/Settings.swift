// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import Logging
import NetActivityAgent
import NetActivityContract

/// The settings, from the system's files (`$XDG_CONFIG_DIRS/netactivity/netactivityd.conf`, by
/// default `/etc/xdg/netactivity/netactivityd.conf`: an administrator's defaults for every user)
/// and then the user's (`$XDG_CONFIG_HOME/netactivity/netactivityd.conf`), read at start and again
/// on SIGHUP. One `key = value` per line, `#` starts a comment; a system file may list keys under
/// `[locks]`, one per line, which the user's file, the command line and the bus then cannot change.
/// A command-line option wins over the files; a key no file sets has its default. A bad line is
/// logged and skipped, never fatal.
struct Settings: Equatable {
    var activationDelay = 1.0
    var completionDelay = 0.17
    var completedTaskLinger = 5.0
    var tray = true
    var notify = false
    var notifyAfter = 10.0
    var logLevel = "notice"
    var deferWhenMetered = true
    var deferInPowerSaver = true
    /// The memory tiers' numbers, in bytes; nil leaves them as they are (see `CacheLimits`).
    var imageCache = CacheLimits()
    var decodedCache = CacheLimits()
    /// Non-public ranges sandboxed apps' downloads may reach (`ADDRESS[/PREFIX]`, separated by
    /// commas or spaces).
    var sandboxedLocalNetworks: [String] = []
    /// The downloader's numbers; nil leaves them as they are.
    var maximumActiveDownloads: UInt32?
    var downloadPrioritization: String?
    var diskCapacity: UInt64?

    static let keys = [
        "activation-delay", "completion-delay", "completed-task-linger", "tray", "notify", "notify-after", "log-level",
        "defer-when-metered", "defer-in-power-saver", "image-memory-capacity",
        "image-preferred-memory-usage-after-purge",
        "decoded-memory-capacity", "decoded-preferred-memory-usage-after-purge", "sandboxed-local-networks",
        "maximum-active-downloads", "download-prioritization", "disk-capacity",
    ]

    /// The D-Bus property each key sets, where one does: a lock refuses writes of it.
    static let properties: [String: String] = [
        "activation-delay": "ActivationDelay", "completion-delay": "CompletionDelay",
        "image-memory-capacity": "MemoryCapacity",
        "image-preferred-memory-usage-after-purge": "PreferredMemoryUsageAfterPurge",
        "decoded-memory-capacity": "DecodedMemoryCapacity",
        "decoded-preferred-memory-usage-after-purge": "DecodedPreferredMemoryUsageAfterPurge",
        "maximum-active-downloads": "MaximumActiveDownloads", "download-prioritization": "DownloadPrioritization",
        "disk-capacity": "DiskCapacity",
    ]

    private static func env(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    static func defaultPath() -> String? {
        guard let base = env("XDG_CONFIG_HOME") ?? env("HOME").map({ $0 + "/.config" }) else { return nil }
        return base + "/netactivity/netactivityd.conf"
    }

    /// The system's files, most important first (`$XDG_CONFIG_DIRS`, else `/etc/xdg`).
    static func systemPaths() -> [String] {
        (env("XDG_CONFIG_DIRS") ?? "/etc/xdg").split(separator: ":").filter { $0.hasPrefix("/") }.map {
            String($0) + "/netactivity/netactivityd.conf"
        }
    }

    /// The largest settings file read: nine keys need a few hundred bytes; a larger file is
    /// refused whole (and the settings in force stay), so a reload costs microseconds, not seconds.
    static let maxFileBytes = 64 * 1024
    /// Problems logged per reading of the file; past them, one line says how many more there were.
    static let maxProblemsLogged = 5

    /// What reading the file gave.
    enum FileText: Equatable {
        /// No file: every key has its default.
        case none
        case text(String)
        /// A file that cannot be used (too large, not a regular file, unreadable): the settings in
        /// force stay as they are.
        case unusable(String)
    }

    /// The file's text. A link is followed (dotfiles are often links).
    static func readFile(_ path: String) -> FileText {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            return errno == ENOENT || errno == ENOTDIR
                ? .none : .unusable("cannot open it: \(String(cString: strerror(errno)))")
        }
        close(fd)
        guard let bytes = Files.readRegular(path, maxBytes: maxFileBytes, followLinks: true) else {
            return .unusable("it is not a regular file of at most \(maxFileBytes) bytes")
        }
        return .text(String(decoding: bytes, as: UTF8.self))
    }

    /// Applies the file's `key = value` lines over `self`; returns what was wrong with it, at most
    /// `maxProblemsLogged` lines and a count of the rest (each cut to a readable length), and the
    /// keys its `[locks]` section lists when it `mayLock` (a system file); `locked` names the keys
    /// it may not set, with the file that locked each.
    mutating func apply(file text: String, mayLock: Bool = false, locked: [String: String] = [:]) -> (
        problems: [String], locks: [String]
    ) {
        var problems: [String] = []
        var locks: [String] = []
        var more = 0
        var inLocks = false
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let problem: String?
            let line = Self.trimmed(
                raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
            if line.hasPrefix("[") {
                inLocks = line == "[locks]"
                problem =
                    !inLocks
                    ? "line \(number + 1): unknown section '\(line.prefix(80))' (known: [locks])"
                    : !mayLock ? "line \(number + 1): only a system file may lock keys; its [locks] are skipped" : nil
            } else if inLocks {
                let key = String(line)
                if line.isEmpty || !mayLock {
                    problem = nil
                } else if Self.keys.contains(key) {
                    locks.append(key)
                    problem = nil
                } else {
                    problem = "line \(number + 1): [locks] lists unknown key '\(key.prefix(80))'"
                }
            } else if let eq = line.firstIndex(of: "="), let by = locked[String(Self.trimmed(line[..<eq]))] {
                problem = "line \(number + 1): \(Self.trimmed(line[..<eq])) is locked by \(by)"
            } else {
                problem = apply(line: line, number: number + 1)
            }
            guard let problem else { continue }
            if problems.count < Self.maxProblemsLogged { problems.append(problem) } else { more += 1 }
        }
        if more > 0 { problems.append("and \(more) more bad lines") }
        return (problems, locks)
    }

    /// Applies one line (its comment gone); what was wrong with it, if anything.
    private mutating func apply(line: Substring, number: Int) -> String? {
        guard !line.isEmpty else { return nil }
        guard let eq = line.firstIndex(of: "=") else {
            return "line \(number): expected key = value, got '\(line.prefix(80))'"
        }
        let key = String(Self.trimmed(line[..<eq]))
        let value = String(Self.trimmed(line[line.index(after: eq)...]))
        return set(key, value).map { "line \(number): \($0.prefix(200))" }
    }

    /// The files read in order, merged: `system` most important first (each applied over the
    /// less important ones), then `user` over them but for the keys a system file locked.
    struct Loaded {
        /// nil when a system file exists but cannot be used: the settings in force then stay.
        var settings: Settings?
        /// The user's file exists but cannot be used: `settings` are the system files' alone (a
        /// start takes them, with their locks; a reload keeps the settings in force).
        var userFileUnusable = false
        /// Each locked key, with the file that locked it.
        var locks: [String: String] = [:]
        /// What was wrong, by file.
        var problems: [(path: String, problem: String)] = []
    }

    static func load(system: [(path: String, text: FileText)], user: (path: String, text: FileText)?) -> Loaded {
        var settings = Settings()
        var loaded = Loaded()
        // Least important first: a more important file's value wins, and the user's file last.
        let files =
            system.reversed().map { ($0.path, $0.text, true) } + (user.map { [($0.path, $0.text, false)] } ?? [])
        for (path, text, isSystem) in files {
            switch text {
            case .none: continue
            case .unusable(let why) where !isSystem:
                // Whatever the user's file is, the administrator's values and locks hold.
                loaded.problems.append(
                    (path, "\(why); the settings in force stay (at start: the system's settings and locks)"))
                loaded.userFileUnusable = true
            case .unusable(let why):
                loaded.problems.append((path, "\(why); the settings in force stay"))
                return loaded
            case .text(let text):
                let (problems, locks) = settings.apply(
                    file: text, mayLock: isSystem, locked: isSystem ? [:] : loaded.locks)
                loaded.problems += problems.map { (path, $0) }
                for key in locks { loaded.locks[key] = path }
            }
        }
        loaded.settings = settings
        return loaded
    }

    /// Sets one key from its text; returns the problem instead when it is unknown or out of range.
    mutating func set(_ key: String, _ value: String) -> String? {
        func seconds(_ limit: Double) -> Double? {
            guard let v = Double(value), v.isFinite, v >= 0, v <= limit else { return nil }
            return v
        }
        func flag() -> Bool? {
            ["true": true, "yes": true, "on": true, "false": false, "no": false, "off": false][value.lowercased()]
        }
        switch key {
        case "activation-delay", "completion-delay":
            guard let v = seconds(NetActivityLimits.maxDelaySeconds) else {
                return "\(key) must be 0...60 seconds, got '\(value)'"
            }
            if key == "activation-delay" { activationDelay = v } else { completionDelay = v }
        case "completed-task-linger":
            guard let v = seconds(3600) else { return "\(key) must be 0...3600 seconds, got '\(value)'" }
            completedTaskLinger = v
        case "notify-after":
            guard let v = seconds(3600) else { return "\(key) must be 0...3600 seconds, got '\(value)'" }
            notifyAfter = v
        case "tray", "notify", "defer-when-metered", "defer-in-power-saver":
            guard let v = flag() else { return "\(key) must be true or false, got '\(value)'" }
            switch key {
            case "tray": tray = v
            case "notify": notify = v
            case "defer-when-metered": deferWhenMetered = v
            default: deferInPowerSaver = v
            }
        case "image-memory-capacity", "image-preferred-memory-usage-after-purge", "decoded-memory-capacity",
            "decoded-preferred-memory-usage-after-purge":
            guard let v = Self.bytes(value) else {
                return
                    "\(key) must be a number of bytes up to 1T (a K, M, G or T after it counts in 1024s), got '\(value)'"
            }
            switch key {
            case "image-memory-capacity": imageCache.capacity = v
            case "image-preferred-memory-usage-after-purge": imageCache.preferred = v
            case "decoded-memory-capacity": decodedCache.capacity = v
            default: decodedCache.preferred = v
            }
        case "sandboxed-local-networks":
            var ranges: [String] = []
            for part in value.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }).map(String.init) {
                guard AgentOptions.isNetworkRange(part) else {
                    return
                        "\(key) must list addresses or ranges (127.0.0.1, 192.168.1.0/24, ::1), got '\(part.prefix(80))'"
                }
                ranges.append(part)
            }
            sandboxedLocalNetworks = ranges
        case "maximum-active-downloads":
            let range = NetActivityLimits.activeDownloads
            guard let v = UInt32(value), range.contains(v) else {
                return "\(key) must be \(range.lowerBound)...\(range.upperBound), got '\(value.prefix(80))'"
            }
            maximumActiveDownloads = v
        case "download-prioritization":
            guard value == "fifo" || value == "lifo" else {
                return "\(key) must be fifo or lifo, got '\(value.prefix(80))'"
            }
            downloadPrioritization = value
        case "disk-capacity":
            guard let v = Self.bytes(value) else {
                return
                    "\(key) must be a number of bytes up to 1T (a K, M, G or T after it counts in 1024s), got '\(value)'"
            }
            diskCapacity = v
        case "log-level":
            guard Logger.Level(rawValue: value) != nil else {
                return "unknown log-level '\(value)'"
            }
            logLevel = value
        default:
            return "unknown key '\(key)' (known: \(Self.keys.joined(separator: ", ")))"
        }
        return nil
    }

    func agentOptions(into options: inout AgentOptions) {
        options.activationDelay = activationDelay
        options.completionDelay = completionDelay
        options.completedTaskLinger = completedTaskLinger
        options.tray = tray
        options.notifyAfter = notify ? notifyAfter : nil
        options.deferral = .init(whenMetered: deferWhenMetered, inPowerSaver: deferInPowerSaver)
        options.imageCacheLimits = imageCache
        options.decodedCacheLimits = decodedCache
        options.sandboxedLocalNetworks = sandboxedLocalNetworks
        options.maximumActiveDownloads = maximumActiveDownloads
        options.downloadPrioritization = downloadPrioritization
        options.diskCapacity = diskCapacity
    }

    /// `104857600`, `100M`, `100MiB`, `1G`: bytes, at most the caches' bound (1 TiB).
    static func bytes(_ text: String) -> UInt64? {
        var digits = Substring(text)
        var unit: UInt64 = 1
        for (i, suffix) in ["K", "M", "G", "T"].enumerated() {
            for spelling in [suffix + "iB", suffix] where digits.uppercased().hasSuffix(spelling.uppercased()) {
                digits = digits.dropLast(spelling.count)
                unit = 1 << (10 * UInt64(i + 1))
                break
            }
            if unit > 1 { break }
        }
        let trimmed = trimmed(digits)
        guard !trimmed.isEmpty, trimmed.allSatisfy(\.isASCII), trimmed.allSatisfy(\.isNumber),
            let n = UInt64(trimmed)
        else { return nil }
        let (total, overflow) = n.multipliedReportingOverflow(by: unit)
        return !overflow && total <= NetActivityLimits.maxCacheCapacity ? total : nil
    }

    private static func trimmed(_ s: Substring) -> Substring {
        let space: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let first = s.firstIndex(where: { !space($0) }), let last = s.lastIndex(where: { !space($0) }) else {
            return ""
        }
        return s[first...last]
    }
}
