// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import Logging

/// A StatusNotifierItem (the KDE names that real tray hosts use: Plasma, waybar's tray,
/// xfce4-panel's sn plugin, GNOME with the AppIndicator extension). Status is Active while the
/// indicator is visible or paused and Passive otherwise (hosts hide passive items); the tooltip
/// names the clients. Its menu (`Menu`, com.canonical.dbusmenu, which the AppIndicator extension requires)
/// lists the clients and tasks and pauses the indicator; it is what a click opens (`ItemIsMenu`).
/// It registers with org.kde.StatusNotifierWatcher whenever one appears.
final class TrayIcon: DesktopObserver {
    static let path = "/StatusNotifierItem"
    static let interface = "org.kde.StatusNotifierItem"
    static let watcher = "org.kde.StatusNotifierWatcher"

    private let connection: Connection
    private let server: ObjectServer
    private unowned let indicator: any IndicatorSource
    private let logger: Logger
    /// The name hosts know the item by (the spec's org.kde.StatusNotifierItem-PID-ID form).
    let itemName = "org.kde.StatusNotifierItem-\(getpid())-1"

    let menu: TrayMenu

    init(
        connection: Connection, server: ObjectServer, scheduler: any Scheduler, indicator: any IndicatorSource,
        tasks: @escaping () -> MenuRows, logger: Logger,
        request: @escaping (MenuAction, String) -> Void = { _, _ in },
        mayAct: @escaping (String) -> Bool = { _ in true }
    ) {
        self.connection = connection
        self.server = server
        self.indicator = indicator
        self.logger = logger
        menu = TrayMenu(
            connection: connection, server: server, scheduler: scheduler,
            content: bound(indicator) { indicator in
                TrayMenuModel.make(enabled: indicator.isEnabled, clients: indicator.clientRows, tasks: tasks())
            },
            toggle: bound(indicator) { $0.setEnabled(!$0.isEnabled) }, request: request,
            mayAct: mayAct)
    }

    /// Active while the indicator is visible, and while it is paused from the menu: hosts hide a
    /// Passive item, and the menu is the way back.
    var status: String { indicator.isVisible || !indicator.isEnabled ? "Active" : "Passive" }

    private var unfollow: (() -> Void)?

    func start() throws {
        menu.start()
        server.export(path: Self.path, interfaces: [makeInterface()])
        connection.requestNameAsync(itemName) { [logger, itemName] result in
            if case .failure(let e) = result {
                logger.notice("The tray item's name \(itemName) was refused: \(e.message)")
            }
        }
        unfollow = connection.followOwner(
            of: Self.watcher, bound(self) { me, owner in if !owner.isEmpty { me.register() } })
    }

    /// Takes the item off the bus (the tray turned off by a reload): hosts drop an item whose
    /// name has no owner.
    func stop() {
        unfollow?()
        unfollow = nil
        server.unexport(path: Self.path)
        menu.stop()
        let name = itemName
        connection.busCallAsync("ReleaseName", timeoutMilliseconds: 5000, { w in w.append(name) }) { _ in }
    }

    private func register() {
        guard
            let m = try? Message.methodCall(
                destination: Self.watcher, path: "/StatusNotifierWatcher", interface: Self.watcher,
                member: "RegisterStatusNotifierItem")
        else { return }
        var w = m.writer()
        w.append(itemName)
        // The reply may come after the item was taken off (a reload): it names what it needs.
        connection.callAsync(m, timeoutMilliseconds: 5000) { [logger, itemName] result in
            if case .failure(let e) = result {
                logger.notice("The tray (StatusNotifierWatcher) refused our item: \(e.message)")
            } else {
                logger.debug("Registered the tray item \(itemName)")
            }
        }
    }

    private func toolTip(_ w: inout MessageWriter) {
        let text = indicator.clientsSummary
        w.appendStruct { s in
            s.append(DesktopIcon.name)
            Self.noPixmaps(&s)
            s.append(tr("Network activity"))
            s.append(text)
        }
    }

    func visibleChanged(_ visible: Bool) {
        let status = self.status
        connection.emitSignal(path: Self.path, interface: Self.interface, member: "NewStatus") { w in w.append(status) }
        connection.emitSignal(path: Self.path, interface: Self.interface, member: "NewToolTip") { _ in }
        menu.changed()
    }

    func clientsChanged() {
        menu.changed()
        guard indicator.isVisible else { return }
        connection.emitSignal(path: Self.path, interface: Self.interface, member: "NewToolTip") { _ in }
    }

    func enabledChanged() {
        menu.changed()
        let status = self.status
        connection.emitSignal(path: Self.path, interface: Self.interface, member: "NewStatus") { w in w.append(status) }
    }

    /// A task came, changed or left.
    func tasksChanged() { menu.changed() }

    /// An empty `a(iiay)`: the item names its icons, it sends no pixels.
    private static func noPixmaps(_ w: inout MessageWriter) {
        w.appendArray(elementSignature: "(iiay)") { _ in }
    }

    private func makeInterface() -> DBusInterface {
        let noPixmaps = Self.noPixmaps
        let click = [DBusArgument("x", "i"), DBusArgument("y", "i")]
        return DBusInterface(
            Self.interface,
            methods: [
                // A click opens the menu (ItemIsMenu); hosts that call these anyway change nothing.
                DBusMethod("Activate", in: click) { _ in },
                DBusMethod("SecondaryActivate", in: click) { _ in },
                DBusMethod("ContextMenu", in: click) { _ in },
                DBusMethod("Scroll", in: [DBusArgument("delta", "i"), DBusArgument("orientation", "s")]) { _ in },
            ],
            properties: [
                DBusProperty("Category", "s", emitsChanged: .const) { w, _ in w.append("SystemServices") },
                DBusProperty("Id", "s", emitsChanged: .const) { w, _ in w.append("netactivity") },
                DBusProperty("Title", "s", emitsChanged: .const) { w, _ in w.append(tr("Network activity")) },
                DBusProperty("Status", "s", emitsChanged: .false, get: bound(self) { me, w, _ in w.append(me.status) }),
                DBusProperty("WindowId", "i", emitsChanged: .const) { w, _ in w.append(Int32(0)) },
                DBusProperty("IconName", "s", emitsChanged: .const) { w, _ in w.append(DesktopIcon.name) },
                // Where hosts that do not read XDG_DATA_DIRS find it (a KDE extension of the spec).
                DBusProperty("IconThemePath", "s", emitsChanged: .const) { w, _ in w.append(DesktopIcon.themePath ?? "")
                },
                DBusProperty("IconPixmap", "a(iiay)", emitsChanged: .const) { w, _ in noPixmaps(&w) },
                DBusProperty("OverlayIconName", "s", emitsChanged: .const) { w, _ in w.append("") },
                DBusProperty("OverlayIconPixmap", "a(iiay)", emitsChanged: .const) { w, _ in noPixmaps(&w) },
                DBusProperty("AttentionIconName", "s", emitsChanged: .const) { w, _ in w.append(DesktopIcon.name) },
                DBusProperty("AttentionIconPixmap", "a(iiay)", emitsChanged: .const) { w, _ in noPixmaps(&w) },
                DBusProperty("AttentionMovieName", "s", emitsChanged: .const) { w, _ in w.append("") },
                DBusProperty(
                    "ToolTip", "(sa(iiay)ss)", emitsChanged: .false, get: bound(self) { me, w, _ in me.toolTip(&w) }),
                DBusProperty("ItemIsMenu", "b", emitsChanged: .const) { w, _ in w.append(true) },
                DBusProperty("Menu", "o", emitsChanged: .const) { w, _ in try w.appendObjectPath(TrayMenu.path) },
            ],
            signals: [
                DBusSignal("NewTitle"), DBusSignal("NewIcon"), DBusSignal("NewAttentionIcon"),
                DBusSignal("NewOverlayIcon"),
                DBusSignal("NewToolTip"), DBusSignal("NewStatus", [DBusArgument("status", "s")]),
            ]
        )
    }
}
