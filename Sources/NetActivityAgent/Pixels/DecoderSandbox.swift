// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import NetActivityCore

/// Where the decoder is and what it runs in: `netactivity-decoder` locks itself in before it reads
/// a byte (see its source); where bubblewrap is installed, it runs inside bwrap too.
struct DecoderSandbox: Equatable {
    /// The decoder's path.
    let executable: String
    /// bwrap's path, or nil to rely on the decoder's own lock alone.
    let bubblewrap: String?

    /// The decoder and bwrap as this agent finds them (`decoderPath`, `bubblewrapPath`); nil when
    /// there is no decoder.
    static func installed() -> DecoderSandbox? {
        decoderPath().map { DecoderSandbox(executable: $0, bubblewrap: bubblewrapPath()) }
    }

    /// The decoder beside the agent (a build tree), else where `make install` and the package put
    /// it (`PREFIX/libexec/netactivity/`); NETACTIVITY_DECODER names another.
    static func decoderPath() -> String? {
        if let given = getenv("NETACTIVITY_DECODER").map({ String(cString: $0) }), !given.isEmpty { return given }
        var candidates: [String] = []
        if let exe = ServiceProcess.executablePath, let slash = exe.lastIndex(of: "/") {
            candidates.append(String(exe[..<slash]) + "/netactivity-decoder")
        }
        if let prefix = ServiceProcess.installPrefix {
            candidates.append(prefix + "/libexec/netactivity/netactivity-decoder")
        }
        return candidates.first { access($0, X_OK) == 0 }
    }

    /// bwrap for the decoders: where the system keeps it (not from PATH: the agent's environment is
    /// the session's); NETACTIVITY_DECODER_BWRAP names another, or `none`.
    static func bubblewrapPath() -> String? {
        guard let given = getenv("NETACTIVITY_DECODER_BWRAP").map({ String(cString: $0) }), !given.isEmpty else {
            return installedBubblewrap()
        }
        return given == "none" ? nil : given
    }

    static func installedBubblewrap() -> String? {
        ["/usr/bin/bwrap", "/usr/local/bin/bwrap"].first { access($0, X_OK) == 0 }
    }

    /// The command that starts one decoder of `kind` (`--svg`: the one that loads librsvg): bare,
    /// or inside bwrap (`wrapped`).
    func command(wrapped: Bool, kind: DecoderPool.Kind = .images) -> [String] {
        let mode = kind == .svg ? ["--svg"] : []
        guard wrapped, let bubblewrap else { return [executable] + mode }
        return Self.bubblewrapArguments(bubblewrap, executable: executable, fonts: kind == .svg) + mode
    }

    /// bwrap's arguments for `executable`, after glycin's (GNOME's sandboxed loaders): every
    /// namespace its own (no network, no other process, no IPC), a root of /usr read-only, the
    /// merged-/usr links, the linker's cache and the decoder itself; no /home, /tmp, /proc or
    /// /dev, no environment, a session of its own (no terminal to write to), gone with the agent.
    /// `fonts`: the SVG decoder's, which draws text: the system's font configuration and its cache,
    /// read-only (the fonts themselves are in /usr).
    static func bubblewrapArguments(_ bwrap: String, executable: String, fonts: Bool = false) -> [String] {
        var arguments = [
            bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--chdir", "/",
            "--ro-bind", "/usr", "/usr", "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
        ]
        for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = readlink(top, &buffer, buffer.count - 1)
            if n > 0 {
                arguments += ["--symlink", String(decoding: buffer[..<n], as: UTF8.self), top]
            } else if access(top, F_OK) == 0 {
                arguments += ["--ro-bind", top, top]
            }
        }
        if fonts {
            arguments += [
                "--ro-bind-try", "/etc/fonts", "/etc/fonts", "--ro-bind-try", "/var/cache/fontconfig",
                "/var/cache/fontconfig",
            ]
        }
        if !executable.hasPrefix("/usr/") { arguments += ["--ro-bind", executable, executable] }
        return arguments + ["--", executable]
    }
}
