// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import NetActivityCore
import Testing

@testable import NetActivityAgent

/// How the peer registry knows who a caller is (`ProcessIdentity`), read from a fake procfs tree
/// of the same shape: `PID/stat`, `cgroup`, `attr/current`, `status`, `mountinfo`, and `root`, a
/// link to a directory that stands for the process's root. The mount table is this process's
/// own, so the fake root's mount is found in it, or edited to be FUSE.
@Suite("Process identity from a procfs tree")
struct ProcessIdentityTests {
    let base: String
    let uid = getuid()
    let startTime: UInt64 = 5000

    init() throws {
        var template = Array("/tmp/netactivity-proc-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SystemError("mkdtemp") }
        base = String(cString: made)
        mkdir(base + "/proc", 0o755)
        mkdir(base + "/roots", 0o755)
    }

    func cleanUp() {
        if let rm = try? ServiceProcess.spawn(["/bin/rm", "-rf", "--", base]) {
            var status: Int32 = 0
            waitpid(rm, &status, 0)
        }
    }

    func write(_ path: String, _ text: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
        close(fd)
    }

    func ownMountinfo() -> String {
        ProcessIdentity.readSmall(at: AT_FDCWD, "/proc/self/mountinfo", limit: 1 << 20) ?? ""
    }

    /// A process `pid` as procfs shows it; returns its root directory.
    @discardableResult
    func process(
        _ pid: UInt32, started: UInt64? = nil, cgroup: String = "0::/user.slice/user-1000.slice/session-2.scope",
        label: String = "unconfined", mountinfo: String? = nil
    ) -> String {
        let dir = "\(base)/proc/\(pid)"
        mkdir(dir, 0o755)
        mkdir(dir + "/attr", 0o755)
        let start = started ?? startTime
        write(dir + "/stat", "\(pid) (fake app) S 1 \(pid) \(pid) 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 \(start) 0 0 0")
        write(dir + "/cgroup", cgroup)
        write(dir + "/attr/current", label)
        write(dir + "/status", "Name:\tfake\nUid:\t\(uid)\t\(uid)\t\(uid)\t\(uid)\n")
        write(dir + "/mountinfo", mountinfo ?? ownMountinfo())
        let root = "\(base)/roots/\(pid)"
        mkdir(root, 0o755)
        symlink(root, dir + "/root")
        return root
    }

    func identity(_ pid: UInt32, startedBy: UInt64 = 10_000) -> ClientIdentity? {
        ProcessIdentity.read(pid: pid, startedBy: startedBy, proc: base + "/proc")
    }

    @Test("a process in a systemd app unit under the user's own manager is that app")
    func appUnit() throws {
        defer { cleanUp() }
        process(
            4242,
            cgroup:
                "0::/user.slice/user-\(uid).slice/user@\(uid).service/app.slice/app-gnome-org.example.Mail-4242.scope")
        let id = try #require(identity(4242))
        #expect(id.app == "app:org.example.Mail")
        #expect(!id.isSandboxed)
        // The same unit name under another user's manager, or outside app.slice, is not.
        process(
            4243,
            cgroup: "0::/user.slice/user-\(uid + 1).slice/user@\(uid + 1).service/app.slice/app-org.example.Mail.scope")
        #expect(identity(4243)?.leaf == "unscoped/pid:4243")
    }

    @Test("a /.flatpak-info in its root makes it that Flatpak, sandboxed; a snap label a Snap")
    func sandboxes() throws {
        defer { cleanUp() }
        let root = process(100)
        write(root + "/.flatpak-info", "[Application]\nname=org.example.Flat\nruntime=runtime/x\n")
        let flat = try #require(identity(100))
        #expect(flat.app == "flatpak:org.example.Flat" && flat.isSandboxed)
        process(101, label: "snap.editor.editor (enforce)")
        let snap = try #require(identity(101))
        #expect(snap.app == "snap:editor" && snap.isSandboxed)
    }

    @Test("a .flatpak-info that is not a regular file (a link, a FIFO) is not read: the process is no Flatpak")
    func plantedFlatpakInfo() throws {
        defer { cleanUp() }
        let real = base + "/roots/info"
        write(real, "[Application]\nname=org.example.Forged\n")
        let linked = process(200)
        symlink(real, linked + "/.flatpak-info")
        #expect(identity(200)?.leaf == "unscoped/pid:200")
        let fifo = process(201)
        mkfifo(fifo + "/.flatpak-info", 0o644)
        #expect(identity(201)?.leaf == "unscoped/pid:201", "and reading it did not wait on the FIFO")
    }

    @Test("a process that started after its connection appeared holds a recycled pid: not known")
    func recycledPid() {
        defer { cleanUp() }
        process(300, started: 20_000)
        #expect(identity(300, startedBy: 10_000) == nil)
        #expect(identity(300, startedBy: 20_000)?.leaf == "unscoped/pid:300", "that very tick: a process of the pool")
        #expect(identity(300, startedBy: 20_001)?.leaf == "unscoped/pid:300", "a tick before")
        #expect(identity(999) == nil, "no such process")
    }

    @Test("a process that started in the very tick its connection appeared is never lent a scoped identity")
    func tieNeverScoped() {
        defer { cleanUp() }
        let scope =
            "0::/user.slice/user-\(uid).slice/user@\(uid).service/app.slice/app-gnome-org.example.Photos-9.scope"
        process(301, started: 20_000, cgroup: scope)
        #expect(identity(301, startedBy: 20_001)?.app == "app:org.example.Photos", "a tick before: that app")
        #expect(identity(301, startedBy: 20_000) == nil, "the same tick: maybe a recycled pid's next owner, not known")
        let root = process(302, started: 20_000)
        write(root + "/.flatpak-info", "[Application]\nname=org.example.Flat\nruntime=runtime/x\n")
        #expect(identity(302, startedBy: 20_001)?.app == "flatpak:org.example.Flat")
        #expect(identity(302, startedBy: 20_000) == nil)
    }

    @Test("a root on a FUSE mount, or on a mount its table does not show, is never looked into: not known")
    func unsafeRoots() throws {
        defer { cleanUp() }
        // The mount the fake roots live on, as this process's table shows it.
        let probe = open(base + "/roots", O_RDONLY | O_DIRECTORY)
        defer { close(probe) }
        let id = try #require(MountTable.mountID(of: probe))
        let table = ownMountinfo()
        let line = try #require(table.split(separator: "\n").first { $0.hasPrefix("\(id) ") })
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        let dash = try #require(fields.firstIndex(of: "-"))
        var fuse = fields.map(String.init)
        fuse[dash + 1] = "fuse.sshfs"
        let asFuse = table.split(separator: "\n").map { $0 == line ? fuse.joined(separator: " ") : String($0) }
            .joined(separator: "\n")
        let root = process(400, mountinfo: asFuse)
        write(root + "/.flatpak-info", "[Application]\nname=org.example.Flat\n")
        #expect(identity(400) == nil)
        let withoutIt = table.split(separator: "\n").filter { !$0.hasPrefix("\(id) ") }.joined(separator: "\n")
        process(401, mountinfo: withoutIt)
        #expect(identity(401) == nil)
        process(402)
        #expect(identity(402)?.leaf == "unscoped/pid:402", "the same tree with its real table is read")
    }

    @Test("the effective uid is the second of status's Uid line")
    func effectiveUID() {
        defer { cleanUp() }
        #expect(ProcessIdentity.effectiveUID(status: "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t1\n") == 0)
        #expect(ProcessIdentity.effectiveUID(status: "Name:\tx\n") == nil)
    }
}
