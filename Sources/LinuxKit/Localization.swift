// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CLinux
import Glibc

/// User-visible text through gettext (domain `netactivity`): the agent's menu, tooltip and
/// notifications, the CLI's messages. Catalogs are `LOCALEDIR/LANG/LC_MESSAGES/netactivity.mo`,
/// where LOCALEDIR is `$NETACTIVITY_LOCALEDIR`, else `share/locale` beside the binary's `bin`
/// (`PREFIX/share/locale` when installed; `.build/share/locale` for a build, which `make` fills),
/// else `/usr/share/locale`.
/// The language is the environment's (`LANGUAGE`, `LC_ALL`, `LC_MESSAGES`, `LANG`); English when
/// no catalog has the text.
public enum Localization {
    public static let domain = "netactivity"

    /// Binds the catalogs; call once at start-up, before any `tr`.
    public static func start() {
        clinux_bind_text_domain(domain, directory)
    }

    /// Where the catalogs are looked for.
    public static var directory: String {
        if let dir = getenv("NETACTIVITY_LOCALEDIR").map({ String(cString: $0) }), !dir.isEmpty { return dir }
        guard let prefix = ServiceProcess.installPrefix else { return "/usr/share/locale" }
        // Installed: PREFIX/bin and PREFIX/share/locale. A build's binaries sit in
        // .build/TRIPLE/debug (.build/debug is a link to it), its catalogs in .build/share/locale.
        for candidate in [prefix + "/share/locale", prefix + "/../share/locale"] {
            var st = stat()
            if stat(candidate, &st) == 0, st.st_mode & S_IFMT == S_IFDIR { return candidate }
        }
        return "/usr/share/locale"
    }
}

/// The translation of `text` (a plain literal: `make pot` extracts every `tr("...")`), with `{1}`,
/// `{2}`, ... replaced by `arguments` in order, so translators may move them.
public func tr(_ text: StaticString, _ arguments: String...) -> String {
    var out = text.description.withCString { String(cString: clinux_dgettext(Localization.domain, $0)) }
    for (i, argument) in arguments.enumerated() {
        out = out.replacing("{\(i + 1)}", with: argument)
    }
    return out
}
