/// Which app a process belongs to, for fairness: its systemd unit when the desktop started it in
/// one (`app-*.scope` or `app-*.service` in `/proc/PID/cgroup`, so every process and connection of
/// one app share one allowance), its Flatpak app id when the unit says it is a Flatpak
/// (`app-flatpak-ID-N.scope`), else the process itself.
public enum AppIdentity {
    /// `cgroup` is the text of `/proc/PID/cgroup` ("" when it could not be read).
    public static func app(pid: UInt32, cgroup: String) -> String {
        for line in cgroup.split(separator: "\n").reversed() {
            // "hierarchy-id:controllers:path"; the unified (v2) line is "0::/...".
            guard let path = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).last else { continue }
            for component in path.split(separator: "/").reversed() where component.hasPrefix("app-") {
                guard component.hasSuffix(".scope") || component.hasSuffix(".service") else { continue }
                if let id = flatpakID(component) { return "flatpak:" + id }
                return "unit:" + component
            }
        }
        return "pid:\(pid)"
    }

    /// "app-flatpak-org.example.App-1234.scope" -> "org.example.App".
    static func flatpakID(_ unit: Substring) -> String? {
        let prefix = "app-flatpak-"
        guard unit.hasPrefix(prefix), unit.hasSuffix(".scope") else { return nil }
        let body = unit.dropFirst(prefix.count).dropLast(".scope".count)
        guard let dash = body.lastIndex(of: "-"), body[body.index(after: dash)...].allSatisfy(\.isNumber) else {
            return body.isEmpty ? nil : String(body)
        }
        let id = body[..<dash]
        return id.isEmpty ? nil : String(id)
    }
}
