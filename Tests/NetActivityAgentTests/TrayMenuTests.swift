// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Testing

@testable import NetActivityAgent

/// The tray's dbusmenu layout, pure: what the AppIndicator extension, Plasma and xfce4-panel draw.
@Suite("Tray menu")
struct TrayMenuTests {
    func labels(_ item: MenuItem) -> [String] {
        item.children.map { if case .string(let s) = $0.properties["label"] ?? .string("-") { s } else { "?" } }
    }

    @Test("status, one row per client and task (capped), a separator, and the check item that pauses the indicator")
    func content() {
        let idle = TrayMenuModel.make(enabled: true, clients: [], tasks: [])
        #expect(labels(idle) == ["No app is using the network", "-", "Show network activity"])
        let clients = (1...10).map { "app\($0) (1)" }
        let busy = TrayMenuModel.make(enabled: false, clients: clients, tasks: ["back_up — 40 %"])
        let rows = labels(busy)
        #expect(rows.first == "Network activity indicator paused")
        #expect(rows[1...8] == ArraySlice(clients.prefix(7) + ["and 3 more"]), "capped at 8 rows with a summary")
        #expect(rows.contains("back__up — 40 %"), "an app's underscore is not a mnemonic")
        let toggle = busy.find(TrayMenuModel.toggleID)
        #expect(toggle?.properties["toggle-state"] == .int32(0))
        #expect(toggle?.properties["toggle-type"] == .string("checkmark"))
        #expect(Set(busy.all.map(\.id)).count == busy.all.count, "ids are unique")
        let many = TrayMenuModel.make(enabled: true, clients: [], tasks: MenuRows(first: ["t1", "t2"], total: 500))
        #expect(
            labels(many).suffix(5).prefix(3) == ["t1", "t2", "and 498 more"],
            "the count comes from the total, not the rows built")
    }

    @Test("the menu's task rows: the oldest few, in creation order, and how many are live, from one pass")
    func taskRows() throws {
        let h = DriverHarness()
        let entries = (1...20).map { h.tasks.makeAgentTask(description: "Download \($0)", running: $0 % 2 == 0) }
        h.tasks.complete(entries[0], error: "")
        let rows = h.tasks.menuRows(limit: 3)
        #expect(rows.total == 19, "the completed one is not live")
        #expect(rows.first == ["Download 2", "Download 3 — paused", "Download 4"], "task 10 is not older than task 2")
        #expect(h.tasks.menuRows(limit: 0) == MenuRows(first: [], total: 19))
    }

    @Test("the wire layout honours the depth and the property names asked for")
    func layout() throws {
        let menu = TrayMenuModel.make(enabled: true, clients: ["a (1)"], tasks: [])
        guard case .structure(let top) = menu.layout(depth: 0, names: []), case .array(_, let none) = top[2] else {
            Issue.record("not (ia{sv}av)")
            return
        }
        #expect(none.isEmpty, "depth 0: the item alone")
        guard case .structure(let all) = menu.layout(depth: -1, names: ["label"]), case .array(_, let kids) = all[2],
            case .variant(.structure(let first)) = kids.first, case .dict(_, _, let props) = first[1]
        else {
            Issue.record("no children")
            return
        }
        #expect(kids.count == menu.children.count)
        #expect(props.map(\.0) == [.string("label")], "only the names asked for")
        #expect(menu.layout(depth: -1, names: []).signature == "(ia{sv}av)")
    }

    @Test("a task whose owner takes requests opens a submenu: Cancel, and Pause or Resume as it stands")
    func taskActions() throws {
        let offers: [MenuTaskOffers?] = [
            MenuTaskOffers(path: "/t/1", offers: TaskOffers(cancellable: true, suspendable: true), suspended: false),
            nil,
            MenuTaskOffers(path: "/t/3", offers: TaskOffers(cancellable: false, suspendable: true), suspended: true),
        ]
        let menu = TrayMenuModel.make(
            enabled: true, clients: [], tasks: MenuRows(first: ["backup", "sync", "upload"], total: 3, offers: offers))
        let backup = try #require(menu.find(200))
        #expect(backup.properties["children-display"] == .string("submenu"))
        #expect(labels(backup) == ["Cancel", "Pause"])
        #expect(
            backup.children.map(\.action) == [.request(.cancel, task: "/t/1"), .request(.suspend(true), task: "/t/1")])
        #expect(try #require(menu.find(201)).children.isEmpty, "a task that takes no request is a plain row")
        #expect(try #require(menu.find(201)).properties["enabled"] == .bool(false))
        #expect(labels(try #require(menu.find(202))) == ["Resume"])
        #expect(try #require(menu.find(202)).children.map(\.action) == [.request(.suspend(false), task: "/t/3")])
        #expect(Set(menu.all.map(\.id)).count == menu.all.count, "ids are unique")
    }
}
