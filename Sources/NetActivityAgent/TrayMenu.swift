// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import LinuxKit
import Logging

/// One item of the tray's menu (com.canonical.dbusmenu): its id, properties and children.
struct MenuItem: Equatable {
    var id: Int32
    var properties: [String: DBusValue]
    var children: [MenuItem] = []
    /// What a click does (never sent to hosts).
    var action: MenuAction? = nil

    /// dbusmenu's wire form, `(ia{sv}av)`, down `depth` levels (-1: all), with only `names`
    /// among the properties (empty: all).
    func layout(depth: Int32, names: Set<String>) -> DBusValue {
        let kids: [DBusValue] = depth == 0 ? [] : children.map { .variant($0.layout(depth: depth - 1, names: names)) }
        return .structure([.int32(id), propertyDict(names: names), .array(elementSignature: "v", kids)])
    }

    /// `(ia{sv})`: the id and its properties among `names` (empty: all), as GetGroupProperties
    /// answers and ItemsPropertiesUpdated tells them.
    func idAndProperties(names: Set<String>) -> DBusValue {
        .structure([.int32(id), propertyDict(names: names)])
    }

    private func propertyDict(names: Set<String>) -> DBusValue {
        let shown = names.isEmpty ? properties : properties.filter { names.contains($0.key) }
        return .dict(
            keySignature: "s", valueSignature: "v",
            shown.sorted { $0.key < $1.key }.map { (.string($0.key), .variant($0.value)) })
    }

    func find(_ wanted: Int32) -> MenuItem? {
        if id == wanted { return self }
        for child in children {
            if let found = child.find(wanted) { return found }
        }
        return nil
    }

    var all: [MenuItem] { [self] + children.flatMap(\.all) }
}

/// What a click on a menu item asks for: a task's owner to cancel, pause or resume it.
enum MenuAction: Equatable {
    case request(TaskRequest, task: String)
}

/// What may be asked of a task a menu row shows (its submenu).
struct MenuTaskOffers: Equatable {
    var path: String
    var offers: TaskOffers
    var suspended: Bool
}

/// The first rows of a list a menu shows and how long the list is, so a long list need not be
/// built whole; for tasks, what each shown row's owner may be asked.
struct MenuRows: Equatable, ExpressibleByArrayLiteral {
    var first: [String]
    var total: Int
    var offers: [MenuTaskOffers?] = []

    init(first: [String], total: Int, offers: [MenuTaskOffers?] = []) {
        self.first = first
        self.total = total
        self.offers = offers
    }

    init(_ all: [String]) { self.init(first: all, total: all.count) }
    init(arrayLiteral rows: String...) { self.init(rows) }
}

/// What the tray's menu shows: pure, so the layout is tested without a bus.
enum TrayMenuModel {
    static let rootID: Int32 = 0
    static let statusID: Int32 = 1
    static let toggleID: Int32 = 2
    static let maxRows = 8
    /// A task row's submenu: Cancel at `firstActionID + 2 * row`, Pause or Resume after it.
    static let firstActionID: Int32 = 1000

    /// dbusmenu reads `_` as a mnemonic mark: text from apps shows as it is.
    static func label(_ text: String) -> DBusValue { .string(text.replacing("_", with: "__")) }

    /// `tasks` needs its first `maxRows` rows only.
    static func make(enabled: Bool, clients: [String], tasks: MenuRows) -> MenuItem {
        var rows: [MenuItem] = []
        let status =
            !enabled
            ? tr("Network activity indicator paused")
            : clients.isEmpty && tasks.total == 0 ? tr("No app is using the network") : tr("Using the network")
        rows.append(MenuItem(id: statusID, properties: ["label": label(status), "enabled": .bool(false)]))
        func capped(_ texts: MenuRows, firstID: Int32) -> [MenuItem] {
            var shown = Array(texts.first.prefix(texts.total > maxRows ? maxRows - 1 : maxRows))
            // TRANSLATORS: the last row of a long list; {1} is how many rows are not shown.
            if texts.total > shown.count { shown.append(tr("and {1} more", String(texts.total - shown.count))) }
            return shown.enumerated().map { i, text in
                let offered = i < texts.offers.count ? texts.offers[i] : nil
                guard let offered, offered.offers.cancellable || offered.offers.suspendable else {
                    return MenuItem(
                        id: firstID + Int32(i), properties: ["label": label(text), "enabled": .bool(false)])
                }
                return MenuItem(
                    id: firstID + Int32(i), properties: ["label": label(text), "children-display": .string("submenu")],
                    children: actions(offered, row: Int32(i)))
            }
        }
        // A task row whose owner takes requests opens a submenu of them.
        func actions(_ offered: MenuTaskOffers, row: Int32) -> [MenuItem] {
            var items: [MenuItem] = []
            let id = firstActionID + 2 * row
            if offered.offers.cancellable {
                items.append(
                    MenuItem(
                        id: id, properties: ["label": label(tr("Cancel"))],
                        action: .request(.cancel, task: offered.path)))
            }
            if offered.offers.suspendable {
                items.append(
                    MenuItem(
                        id: id + 1, properties: ["label": label(offered.suspended ? tr("Resume") : tr("Pause"))],
                        action: .request(.suspend(!offered.suspended), task: offered.path)))
            }
            return items
        }
        rows += capped(MenuRows(clients), firstID: 100)
        if tasks.total > 0 {
            rows.append(MenuItem(id: 3, properties: ["type": .string("separator")]))
            rows.append(MenuItem(id: 4, properties: ["label": label(tr("Tasks")), "enabled": .bool(false)]))
            rows += capped(tasks, firstID: 200)
        }
        rows.append(MenuItem(id: 5, properties: ["type": .string("separator")]))
        rows.append(
            MenuItem(
                id: toggleID,
                properties: [
                    "label": label(tr("Show network activity")), "toggle-type": .string("checkmark"),
                    "toggle-state": .int32(enabled ? 1 : 0),
                ]))
        return MenuItem(id: rootID, properties: ["children-display": .string("submenu")], children: rows)
    }
}

/// The tray item's menu (`com.canonical.dbusmenu` at /MenuBar), what Ubuntu's AppIndicator
/// extension, KDE Plasma and xfce4-panel open on the item: who is using the network, the tasks
/// with their progress, and a check item that pauses and resumes the indicator (Enabled).
/// Changes reach hosts at most once per 250 ms, and only once a host has read the menu (with no
/// tray host on the bus, a download that comes and goes costs the bus no menu signal): a
/// LayoutUpdated, and every item's properties in an ItemsPropertiesUpdated. Whole, because a host
/// may have read the menu at any moment since the last change it was told of, and hosts such as
/// the AppIndicator extension read only the items' types with GetLayout and the properties of
/// items new to them.
final class TrayMenu {
    static let path = "/MenuBar"
    static let interface = "com.canonical.dbusmenu"

    private let connection: Connection
    private let server: ObjectServer
    private let scheduler: any Scheduler
    private let content: () -> MenuItem
    private let toggle: () -> Void
    /// A click on a task's Cancel, Pause or Resume, by a caller (the tray host).
    private let request: (MenuAction, String) -> Void
    /// Whether a caller may act through the menu (host callers; a sandboxed app reading the menu
    /// may not pause the indicator or ask for another app's task).
    private let mayAct: (String) -> Bool
    private(set) var revision: UInt32 = 1
    private var announced: MenuItem?
    private var timer: TimerID?
    /// A host has read the menu (GetLayout, GetGroupProperties, GetProperty): from then on it is
    /// told of every change.
    private var read = false

    init(
        connection: Connection, server: ObjectServer, scheduler: any Scheduler,
        content: @escaping () -> MenuItem, toggle: @escaping () -> Void,
        request: @escaping (MenuAction, String) -> Void = { _, _ in },
        mayAct: @escaping (String) -> Bool = { _ in true }
    ) {
        self.connection = connection
        self.server = server
        self.scheduler = scheduler
        self.content = content
        self.toggle = toggle
        self.request = request
        self.mayAct = mayAct
    }

    func start() {
        announced = content()
        server.export(path: Self.path, interfaces: [makeInterface()])
    }

    func stop() {
        if let t = timer { scheduler.cancel(t) }
        timer = nil
        server.unexport(path: Self.path)
    }

    /// Something the menu shows may have changed.
    func changed() {
        guard timer == nil else { return }
        timer = scheduler.schedule(afterNanoseconds: 250_000_000, bound(self) { $0.settled() })
    }

    /// A quarter of a second after the first change: one announcement for all of them.
    private func settled() {
        timer = nil
        let now = content()
        guard let before = announced, now != before else { return }
        announced = now
        revision &+= 1
        // Nobody holds the menu: nobody needs telling (the first read gets this one).
        guard read else { return }
        announce(from: before, to: now)
    }

    private func announce(from before: MenuItem, to now: MenuItem) {
        let revision = self.revision
        connection.emitSignal(path: Self.path, interface: Self.interface, member: "LayoutUpdated") { w in
            w.append(revision)
            w.append(Int32(0))
        }
        // Every item whole (a few dozen at most): `id` and its properties, as GetGroupProperties gives them.
        let updated = now.all.map { $0.idAndProperties(names: []) }
        let old = Dictionary(before.all.map { ($0.id, $0.properties) }, uniquingKeysWith: { a, _ in a })
        let removed: [DBusValue] = now.all.compactMap { item in
            let gone = (old[item.id] ?? [:]).keys.filter { item.properties[$0] == nil }.sorted()
            return gone.isEmpty
                ? nil : .structure([.int32(item.id), .array(elementSignature: "s", gone.map { .string($0) })])
        }
        connection.emitSignal(path: Self.path, interface: Self.interface, member: "ItemsPropertiesUpdated") { w in
            try? w.append(.array(elementSignature: "(ia{sv})", updated))
            try? w.append(.array(elementSignature: "(ias)", removed))
        }
    }

    private static func strings(_ value: DBusValue) -> Set<String> {
        guard case .array(_, let items) = value else { return [] }
        return Set(items.compactMap { if case .string(let s) = $0 { s } else { nil } })
    }

    private static func ints(_ value: DBusValue) -> [Int32] {
        guard case .array(_, let items) = value else { return [] }
        return items.compactMap { if case .int32(let i) = $0 { i } else { nil } }
    }

    /// A click on the check item toggles the indicator, one on a task's Cancel, Pause or Resume
    /// asks its owner; other events, and any from a caller that may not act, change nothing.
    private func event(id: Int32, name: String, in menu: MenuItem, from sender: String) {
        guard name == "clicked", mayAct(sender) else { return }
        if id == TrayMenuModel.toggleID {
            toggle()
            changed()
        } else if id >= TrayMenuModel.firstActionID, let action = menu.find(id)?.action {
            request(action, sender)
        }
    }

    private func getLayout(_ call: inout MethodCall) throws {
        let parent = try call.args.read(Int32.self)
        let depth = try call.args.read(Int32.self)
        let names = Self.strings(try call.args.readValue())
        guard let item = content().find(parent) else {
            throw DBusError.invalidArgs("No menu item \(parent)")
        }
        read = true
        call.reply.append(revision)
        try call.reply.append(item.layout(depth: depth, names: names))
    }

    private func getGroupProperties(_ call: inout MethodCall) throws {
        let ids = Self.ints(try call.args.readValue())
        let names = Self.strings(try call.args.readValue())
        let menu = content()
        read = true
        let items = ids.isEmpty ? menu.all : ids.compactMap { menu.find($0) }
        try call.reply.append(
            .array(elementSignature: "(ia{sv})", items.map { $0.idAndProperties(names: names) }))
    }

    private func getProperty(_ call: inout MethodCall) throws {
        let id = try call.args.read(Int32.self)
        let name = try call.args.read(String.self)
        read = true
        guard let value = content().find(id)?.properties[name] else {
            throw DBusError.invalidArgs("Menu item \(id) has no property '\(name.prefix(64))'")
        }
        try call.reply.append(.variant(value))
    }

    private func eventCall(_ call: inout MethodCall) throws {
        let id = try call.args.read(Int32.self)
        let name = try call.args.read(String.self)
        event(id: id, name: name, in: content(), from: call.sender)
    }

    private func eventGroup(_ call: inout MethodCall) throws {
        guard case .array(_, let events) = try call.args.readValue() else { return }
        let menu = content()
        var errors: [DBusValue] = []
        for case .structure(let fields) in events {
            guard fields.count == 4, case .int32(let id) = fields[0], case .string(let name) = fields[1]
            else { continue }
            if menu.find(id) == nil {
                errors.append(.int32(id))
            } else {
                event(id: id, name: name, in: menu, from: call.sender)
            }
        }
        try call.reply.append(.array(elementSignature: "i", errors))
    }

    private func makeInterface() -> DBusInterface {
        let itemProperties = DBusArgument("properties", "a(ia{sv})")
        return DBusInterface(
            Self.interface,
            methods: [
                DBusMethod(
                    "GetLayout",
                    in: [
                        DBusArgument("parentId", "i"), DBusArgument("recursionDepth", "i"),
                        DBusArgument("propertyNames", "as"),
                    ],
                    out: [DBusArgument("revision", "u"), DBusArgument("layout", "(ia{sv}av)")],
                    bound(self) { try $0.getLayout(&$1) }),
                DBusMethod(
                    "GetGroupProperties", in: [DBusArgument("ids", "ai"), DBusArgument("propertyNames", "as")],
                    out: [itemProperties], bound(self) { try $0.getGroupProperties(&$1) }),
                DBusMethod(
                    "GetProperty", in: [DBusArgument("id", "i"), DBusArgument("name", "s")],
                    out: [DBusArgument("value", "v")], bound(self) { try $0.getProperty(&$1) }),
                DBusMethod(
                    "Event",
                    in: [
                        DBusArgument("id", "i"), DBusArgument("eventId", "s"), DBusArgument("data", "v"),
                        DBusArgument("timestamp", "u"),
                    ], bound(self) { try $0.eventCall(&$1) }),
                DBusMethod(
                    "EventGroup", in: [DBusArgument("events", "a(isvu)")], out: [DBusArgument("idErrors", "ai")],
                    bound(self) { try $0.eventGroup(&$1) }),
                DBusMethod("AboutToShow", in: [DBusArgument("id", "i")], out: [DBusArgument("needUpdate", "b")]) {
                    call in
                    call.reply.append(false)
                },
                DBusMethod(
                    "AboutToShowGroup", in: [DBusArgument("ids", "ai")],
                    out: [DBusArgument("updatesNeeded", "ai"), DBusArgument("idErrors", "ai")]
                ) { call in
                    try call.reply.append(.array(elementSignature: "i", []))
                    try call.reply.append(.array(elementSignature: "i", []))
                },
            ],
            properties: [
                DBusProperty("Version", "u", emitsChanged: .const) { w, _ in w.append(UInt32(3)) },
                DBusProperty("TextDirection", "s", emitsChanged: .const) { w, _ in w.append("ltr") },
                DBusProperty("Status", "s", emitsChanged: .const) { w, _ in w.append("normal") },
                DBusProperty("IconThemePath", "as", emitsChanged: .const) { w, _ in
                    w.appendArray(elementSignature: "s") { _ in }
                },
            ],
            signals: [
                DBusSignal(
                    "ItemsPropertiesUpdated",
                    [DBusArgument("updatedProps", "a(ia{sv})"), DBusArgument("removedProps", "a(ias)")]),
                DBusSignal("LayoutUpdated", [DBusArgument("revision", "u"), DBusArgument("parent", "i")]),
                DBusSignal("ItemActivationRequested", [DBusArgument("id", "i"), DBusArgument("timestamp", "u")]),
            ]
        )
    }
}
