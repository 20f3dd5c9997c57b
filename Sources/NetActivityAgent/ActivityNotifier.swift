// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import LinuxKit
import Logging
import NetActivityContract

/// Opt-in desktop notifications (org.freedesktop.Notifications): one when activity has stayed
/// visible for `after` seconds, updated in place (replaces_id) as the clients change, and closed
/// when the activity ends; and one per failed download (category transfer.error), also replaced
/// rather than stacked.
///
/// Etiquette: the first post may pop a banner; updates go out with low urgency and no sound, which
/// GNOME Shell (since 41) and other servers apply in place without a new banner. One the user
/// dismissed (NotificationClosed reason 2, from the server that owns the name) stays closed for
/// the rest of that episode of activity; the next episode may post again.
final class ActivityNotifier: DesktopObserver {
    static let name = "org.freedesktop.Notifications"
    static let path = "/org/freedesktop/Notifications"
    static let closedRule =
        "type='signal',sender='\(name)',path='\(path)',interface='\(name)',member='NotificationClosed'"
    /// NotificationClosed's reason when the user dismissed the notification.
    static let dismissedByUser: UInt32 = 2

    private let connection: Connection
    private let scheduler: any Scheduler
    private unowned let indicator: any IndicatorSource
    private let logger: Logger
    let after: Double
    private var timer: TimerID?
    /// The activity notification on screen (0: none), and the id to replace next.
    private var shownID: UInt32 = 0
    private var pending = false
    private var failureID: UInt32 = 0
    /// The user closed this episode's notification: nothing more is posted until Visible ends.
    private(set) var dismissed = false
    /// The unique name of the notification server (only its NotificationClosed is believed).
    private var server = ""
    private var unfollow: (() -> Void)?
    private var closedHandler: Int?

    init(
        connection: Connection, scheduler: any Scheduler, indicator: any IndicatorSource, logger: Logger, after: Double
    ) {
        self.connection = connection
        self.scheduler = scheduler
        self.indicator = indicator
        self.logger = logger
        self.after = after
    }

    func start() throws {
        connection.addMatchWithoutWaiting(Self.closedRule)
        closedHandler = connection.onSignal(
            SignalMatch(path: Self.path, interface: Self.name, member: "NotificationClosed"),
            bound(self) { $0.closed($1) })
        unfollow = connection.followOwner(of: Self.name, bound(self) { $0.serverChanged($1) })
    }

    private func serverChanged(_ owner: String) {
        server = owner
        bodyMarkup = false
        if !owner.isEmpty { askCapabilities(of: owner) }
    }

    /// Whether the server renders markup in bodies (`body-markup`): then apps' text in a body is
    /// escaped, so it stays text.
    private var bodyMarkup = false

    private func askCapabilities(of owner: String) {
        guard
            let m = try? Message.methodCall(
                destination: owner, path: Self.path, interface: Self.name, member: "GetCapabilities")
        else { return }
        connection.callAsync(m, timeoutMilliseconds: 5000) { [weak self] result in
            guard let self, self.server == owner, case .success(let reply) = result else { return }
            var r = reply.reader()
            self.bodyMarkup = ((try? r.readStrings()) ?? []).contains("body-markup")
        }
    }

    /// Turned off (a reload): nothing more is posted, and what is on screen closes.
    func stop() {
        if let t = timer { scheduler.cancel(t) }
        timer = nil
        close(shownID)
        shownID = 0
        unfollow?()
        unfollow = nil
        if let id = closedHandler {
            connection.removeSignalHandler(id)
            connection.removeMatch(Self.closedRule)
        }
        closedHandler = nil
    }

    /// NotificationClosed(id, reason) from the server: a notification of ours that is gone is not
    /// replaced any more; dismissed by the user, the activity one stays away for this episode.
    func closed(_ message: Message) {
        guard !server.isEmpty, message.sender == server else { return }
        var r = message.reader()
        guard let id = try? r.read(UInt32.self), let reason = try? r.read(UInt32.self), id != 0 else { return }
        if id == failureID { failureID = 0 }
        guard id == shownID else { return }
        shownID = 0
        if reason == Self.dismissedByUser, indicator.isVisible {
            dismissed = true
            logger.debug("The activity notification was dismissed; not posting again until the activity ends")
        }
    }

    func visibleChanged(_ visible: Bool) {
        if let t = timer { scheduler.cancel(t) }
        timer = nil
        if !visible { dismissed = false }
        if visible {
            timer = scheduler.schedule(
                afterNanoseconds: UInt64(after * 1e9),
                bound(self) { me in
                    me.timer = nil
                    me.show()
                })
        } else if shownID != 0 {
            close(shownID)
            shownID = 0
        }
    }

    /// An update names the busy clients; once the count is 0 (the completion delay, the indicator
    /// still visible) there is nothing to say: the notification stays until Visible ends, then closes.
    func clientsChanged() {
        if shownID != 0, indicator.isVisible, indicator.total > 0 { show() }
    }

    private func show() {
        guard indicator.isVisible, indicator.total > 0, !pending, !dismissed else { return }
        pending = true
        let seconds = after == after.rounded() ? String(Int(after)) : String(after)
        notify(
            replacing: shownID, summary: tr("Network activity"),
            // TRANSLATORS: {1} lists the apps ("firefox (2), thunderbird (1)"), {2} is a number of seconds.
            body: tr("{1} for more than {2} s", indicator.clientsSummary, seconds), category: "network",
            quiet: shownID != 0
        ) { [weak self] id in
            guard let self else { return }
            pending = false
            // Activity may have ended (or the user dismissed it) while the call was out: then close
            // what was just shown.
            if indicator.isVisible, !dismissed { shownID = id } else { close(id) }
        }
    }

    /// A failed download (the downloader calls this).
    func downloadFailed(url: String, error: String) {
        notify(
            replacing: failureID, summary: tr("Download failed"), body: "\(url): \(error)", category: "transfer.error"
        ) { [weak self] id in self?.failureID = id }
    }

    /// `quiet`: an update of what is on screen (low urgency, no sound: no new banner).
    private func notify(
        replacing: UInt32, summary: String, body: String, category: String, quiet: Bool = false,
        _ done: @escaping (UInt32) -> Void
    ) {
        guard
            let m = try? Message.methodCall(
                destination: Self.name, path: Self.path, interface: Self.name, member: "Notify")
        else { return }
        var w = m.writer()
        w.append("netactivity")
        w.append(replacing)
        w.append(DesktopIcon.name)
        w.append(summary)
        w.append(bodyMarkup ? DisplayText.markupEscaped(body) : body)
        w.appendArray(elementSignature: "s") { _ in }
        var hints: [String: DBusValue] = ["category": .string(category), "desktop-entry": .string("netactivityd")]
        if quiet {
            hints["urgency"] = .byte(0)
            hints["suppress-sound"] = .bool(true)
        }
        try? w.appendVardict(hints)
        w.append(Int32(-1))
        connection.callAsync(m, timeoutMilliseconds: 5000) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let reply):
                var r = reply.reader()
                done((try? r.read(UInt32.self)) ?? 0)
            case .failure(let e):
                self.pending = false
                self.logger.debug("No notification posted: \(e.message)")
            }
        }
    }

    private func close(_ id: UInt32) {
        guard id != 0,
            let m = try? Message.methodCall(
                destination: Self.name, path: Self.path, interface: Self.name, member: "CloseNotification")
        else { return }
        var w = m.writer()
        w.append(id)
        connection.callAsync(m, timeoutMilliseconds: 5000) { _ in }
    }
}
