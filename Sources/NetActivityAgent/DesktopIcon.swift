// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit

/// The one icon of every surface the agent draws on (tray, notifications): the project's own
/// `netactivity-symbolic`, when it is installed beside the agent (`PREFIX/bin/netactivityd` and
/// `PREFIX/share/icons/hicolor/scalable/status/`), else the icon theme's symbolic network icon.
enum DesktopIcon {
    static let own = "netactivity-symbolic"
    static let generic = "network-transmit-receive-symbolic"

    /// `PREFIX/share/icons` when the agent's own icon is there.
    static let themePath: String? = {
        guard let prefix = ServiceProcess.installPrefix else { return nil }
        let icons = prefix + "/share/icons"
        return access(icons + "/hicolor/scalable/status/\(own).svg", R_OK) == 0 ? icons : nil
    }()

    static var name: String { themePath == nil ? generic : own }
}
