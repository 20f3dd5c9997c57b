// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import DBusKit
public import LinuxKit
public import Logging
import NetActivityContract
import NetActivityCore

/// Options the agent starts with.
public struct AgentOptions: Sendable {
    public var activationDelay: Double = 1.0
    public var completionDelay: Double = 0.17
    /// Seconds a completed task stays on the bus for observers before it leaves.
    public var completedTaskLinger: Double = 5.0
    /// Where LowMemoryMonitor, NetworkManager and power-profiles-daemon are looked for: nil is
    /// the system bus, "" turns them off.
    public var systemBusAddress: String?
    /// Which system conditions hold `very-low` downloads.
    public var deferral = DownloadConditions.Deferral()
    /// Register a StatusNotifierItem with org.kde.StatusNotifierWatcher when one is on the bus.
    public var tray = true
    /// Post org.freedesktop.Notifications when activity stays visible this long (nil: never).
    public var notifyAfter: Double?
    /// The open-file limit the agent runs with (after raising it). Fd-hungry holdings scale with
    /// it, so that no one client can run the agent out of descriptors.
    public var fileLimit: UInt64 = 1024
    /// The settings file's limits for the image cache and for the decoded tier (nil: the default).
    public var imageCacheLimits = CacheLimits()
    public var decodedCacheLimits = CacheLimits()
    /// Non-public addresses or ranges (`ADDRESS[/PREFIX]`) a sandboxed or unknown caller's
    /// downloads may still reach (the settings' `sandboxed-local-networks`; none by default).
    /// Texts `isNetworkRange` refuses are left out.
    public var sandboxedLocalNetworks: [String] = []
    /// The settings' downloader numbers (nil: left where they are).
    public var maximumActiveDownloads: UInt32?
    public var downloadPrioritization: String?
    public var diskCapacity: UInt64?
    /// The properties an administrator locked, each with what locked it (a key and its file):
    /// no caller may change them (`AccessDenied` naming the lock); the settings files may.
    public var locks: [String: String] = [:]
    public init() {}

    /// Whether `text` is an address or a range `sandboxedLocalNetworks` takes.
    public static func isNetworkRange(_ text: String) -> Bool { NetworkRange(text[...]) != nil }

    var sandboxReach: NetworkReach {
        NetworkReach(allowed: sandboxedLocalNetworks.compactMap { NetworkRange($0[...]) })
    }
}

/// A memory tier's two numbers as the settings file gives them: a number it does not give has its
/// default (as every key of the file), but for a default preferred usage above a lower capacity
/// given, which comes down to it.
public struct CacheLimits: Sendable, Equatable {
    public var capacity: UInt64?
    public var preferred: UInt64?
    public init(capacity: UInt64? = nil, preferred: UInt64? = nil) {
        self.capacity = capacity
        self.preferred = preferred
    }

    /// The limits to set, with `defaults` (capacity, preferred) for the numbers not given.
    func over(defaults: (UInt64, UInt64)) -> (capacity: UInt64, preferred: UInt64) {
        let newCapacity = capacity ?? defaults.0
        return (newCapacity, preferred ?? min(defaults.1, newCapacity))
    }
}

/// The agent: the composition root that builds the services on one connection and one loop,
/// exports their tables at `/org/example/NetActivity`, and wires them through narrow protocols:
///
/// - `ActivityService` (org.example.NetActivity): ledger, leases, indicator, Visible;
/// - `TaskService` (org.example.NetActivity.Task objects), adding activity through `ActivitySink`;
/// - `ImageCacheService` (org.example.NetActivity.ImageCache), the downloader's `ImageStore`;
/// - `DownloadService` (org.example.NetActivity.Downloader), making tasks through `TaskFactory`;
/// - the desktop observers (tray, notifications), reading the indicator through `IndicatorSource`.
///
/// Everything runs on the event loop's thread; nothing is locked.
public final class Agent {
    public let context: AgentContext
    public let activity: ActivityService
    public let tasks: TaskService
    public let images: ImageCacheService
    public let downloads: DownloadService
    private let connection: Connection
    private let loop: EventLoop
    private let peers: BusPeerRegistry
    private var options: AgentOptions
    private var pressure: MemoryPressureMonitor?
    /// The system bus, shared by the memory-pressure monitor and the system conditions.
    private var systemBus: Connection?
    private var conditions: SystemConditions?

    /// Called when the agent should stop (bus lost, name lost).
    public var onStop: (() -> Void)?

    public init(connection: Connection, loop: EventLoop, options: AgentOptions, logger: Logger) {
        self.connection = connection
        self.loop = loop
        self.options = options
        peers = BusPeerRegistry(connection: connection, loop: loop, logger: logger)
        let server = ObjectServer(sink: connection)
        // Large GetManagedObjects replies are built a slice per turn of the loop.
        server.runLater = { [loop] work in _ = loop.schedule(afterNanoseconds: 0, work) }
        context = AgentContext(
            scheduler: loop, server: server, peers: peers, logger: logger, fileLimit: options.fileLimit)
        // A new peer's calls wait, in order, until the registry knows its app (one bus round trip),
        // so that every handler charges what it grants to the right app. They are then handed back
        // to the connection, which dispatches them like any other call (under its limit on queued
        // replies); a peer that leaves meanwhile has them served at once, just before its
        // departure releases what they granted.
        // Every call passes here: strong captures, which a call uses without counting (a `bound`
        // one costs a retain and a release per use). The cycle through the connection is broken
        // in `deinit`, which takes the handler back.
        connection.methodCallHandler = { [peers, server, connection] message in
            let sender = connection.sender(of: message)
            // A peer that does not read gets no reply (see BusPeerRegistry): a call that only reads
            // is not even run, so answers made for nobody never hold the loop.
            if !connection.silenced.isEmpty, let sender, connection.silenced.contains(sender), Self.onlyReads(message) {
                return
            }
            guard let sender, sender.utf8.first == UInt8(ascii: ":"), !peers.isKnown(sender) else {
                return server.handle(message, sender: sender)
            }
            // A call larger than any valid one is answered at once, never held: held, a call of
            // 64 MiB kept libdbus's queue over its limit (63 MiB), so the reply the registry waited
            // for could not be read, and everyone waited 5 s for its timeout.
            let size = Int(message.argumentsBound)
            if size > NetActivityLimits.maxCallBytes {
                return server.replyError(
                    message,
                    DBusError(
                        name: NetActivityError.Name.tooLarge.rawValue,
                        message:
                            "A call of \(size) bytes is larger than any the agent takes (\(NetActivityLimits.maxCallBytes)); pass large images as a sealed memfd (AddImageFromFd)"
                    ))
            }
            // Held calls count in libdbus's incoming queue too: all of them together stay far below
            // its limit, so the bus's answers the registry waits for can always be read.
            guard peers.heldBytes + size <= NetActivityLimits.maxHeldCallBytes else {
                return server.replyError(
                    message,
                    DBusError(
                        name: NetActivityError.Name.limitsExceeded.rawValue,
                        message:
                            "\(peers.heldBytes) bytes of calls already wait for their callers to be known; call again"))
            }
            peers.hold(size)
            peers.resolve(sender) { leaving in
                peers.hold(-size)
                if leaving { server.handle(message, sender: sender) } else { connection.redeliver(message) }
            }
        }
        activity = ActivityService(
            context: context, loop: loop, activationDelay: options.activationDelay,
            completionDelay: options.completionDelay)
        tasks = TaskService(context: context, activity: activity, linger: options.completedTaskLinger)
        let pixels = PixelTier(fileLimit: context.accounts.fileLimit)
        let decoding = Decoding(tier: pixels, context: context, loop: loop)
        images = ImageCacheService(context: context, pixels: pixels, decoding: decoding)
        downloads = DownloadService(
            context: context, loop: loop, images: images, pixels: pixels, decoding: decoding, tasks: tasks,
            activity: activity,
            announceAfter: bound(activity) { $0.machine.activationDelay })
        activity.tasks = tasks
        downloads.onFailure.append(
            bound(self) { me, url, message in me.notifier?.downloadFailed(url: url, error: message) })
        // A departing client's tasks complete (ClientVanished) and its receipts go before its
        // activity is dropped as a whole, so observers see the completions first.
        peers.onDeparture(bound(self) { me, peer in me.departed(peer) })
    }

    private func departed(_ peer: String) {
        tasks.ownerVanished(peer)
        downloads.ownerVanished(peer)
        activity.clientVanished(peer)
    }

    /// Whether a call only reads (its reply is all it does): image lookups, properties,
    /// introspection, the object list, Peer.
    static func onlyReads(_ message: Message) -> Bool {
        guard let member = message.member else { return false }
        switch message.interface {
        case "org.freedesktop.DBus.Peer", "org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.ObjectManager":
            return true
        case "org.freedesktop.DBus.Properties": return member != "Set"
        case NetActivityInterface.imageCache.rawValue: return member.hasPrefix("Lookup") || member.hasPrefix("Open")
        default: return false
        }
    }

    /// Exports the object and subscribes to the bus signals the agent follows. Call before
    /// requesting the name, so the first call that arrives finds the object.
    public func start() throws {
        let server = context.server
        server.addObjectManager(at: NetActivityBus.objectPath)
        server.export(
            path: NetActivityBus.objectPath,
            interfaces: [activity.makeInterface(), images.makeInterface(), downloads.makeInterface()])
        startMemoryPressure()
        startSystemConditions()
        startDesktopObservers()
        // KDE Plasma's job tracker, whenever one is on the bus.
        let jobs = JobTracker(
            connection: connection, tasks: tasks, scheduler: context.scheduler, logger: context.logger,
            activationDelay: bound(activity) { $0.machine.activationDelay })
        tasks.jobs = jobs
        jobs.start()
        self.jobs = jobs
        applyCacheLimits()
        applyDownloaderSettings()
        context.locks = options.locks
        downloads.sandboxReach = options.sandboxReach
        try peers.start()
        peers.probeStats()
        downloads.onDesktopProxy = bound(self) { $0.followProxySettings() }
        connection.onSignal(
            SignalMatch(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameLost"),
            bound(self) { me, message in me.nameLost(message) })
    }

    private func nameLost(_ message: Message) {
        var r = message.reader()
        if (try? r.read(String.self)) == NetActivityBus.name {
            context.logger.notice("Lost the name \(NetActivityBus.name) (replaced by another instance); exiting")
            onStop?()
        }
    }

    /// Proxy answers are forgotten when the desktop's proxy settings change: dconf announces
    /// every write under GNOME's `/system/proxy/` (and a reset of a folder above it), KDE a
    /// change of its proxy settings. Subscribed at the first download that takes the desktop's
    /// settings (match rules only: the bus sends nothing until one changes). The sender and the
    /// prefix are checked again here: a unicast signal reaches the agent whatever the match rule
    /// says, and only dconf's own service (the owner of `ca.desrt.dconf`) speaks for dconf: any
    /// other client's Notify would make every download ask the proxy resolver again.
    private func followProxySettings() {
        _ = connection.followOwner(of: Self.dconfName, bound(self) { $0.dconfOwner = $1 })
        let dconf = SignalMatch(interface: "ca.desrt.dconf.Writer", member: "Notify")
        connection.addMatchWithoutWaiting(dconf.rule + ",arg0path='/system/proxy/'")
        connection.onSignal(
            dconf,
            bound(self) { me, message in
                var r = message.reader()
                guard !me.dconfOwner.isEmpty, message.sender == me.dconfOwner,
                    let prefix = try? r.read(String.self),
                    prefix.hasPrefix("/system/proxy/") || "/system/proxy/".hasPrefix(prefix)
                else { return }
                me.context.logger.debug("dconf changed \(prefix): proxy answers are asked for again")
                me.downloads.proxySettingsChanged()
            })
        let kde = SignalMatch(interface: "org.kde.KIO.Scheduler", member: "reparseSlaveConfiguration")
        connection.addMatchWithoutWaiting(kde.rule)
        connection.onSignal(kde, bound(self) { me, _ in me.downloads.proxySettingsChanged() })
    }

    deinit {
        // The handler holds the connection, the registry and the server: let them go.
        connection.methodCallHandler = nil
        systemBus?.close()
    }

    private var jobs: JobTracker?
    private static let dconfName = "ca.desrt.dconf"
    /// The unique name of dconf's service while it runs ("" otherwise).
    private var dconfOwner = ""
    private var tray: TrayIcon?
    private var notifier: ActivityNotifier?

    /// Applies the settings a reload may change (SIGHUP re-reads the config file): the delays, the
    /// tray and the notifications. What apps set over D-Bus since is overridden, as the user asked.
    public func reconfigure(_ new: AgentOptions) {
        do {
            try activity.setDelays(activation: new.activationDelay, completion: new.completionDelay)
        } catch {
            context.logger.warning("Delays not changed: \(error.message)")
        }
        options.activationDelay = new.activationDelay
        options.completionDelay = new.completionDelay
        options.tray = new.tray
        options.notifyAfter = new.notifyAfter
        options.deferral = new.deferral
        downloads.conditions.set(new.deferral)
        options.imageCacheLimits = new.imageCacheLimits
        options.decodedCacheLimits = new.decodedCacheLimits
        options.sandboxedLocalNetworks = new.sandboxedLocalNetworks
        downloads.sandboxReach = new.sandboxReach
        options.maximumActiveDownloads = new.maximumActiveDownloads
        options.downloadPrioritization = new.downloadPrioritization
        options.diskCapacity = new.diskCapacity
        options.locks = new.locks
        context.locks = new.locks
        startDesktopObservers()
        applyCacheLimits()
        applyDownloaderSettings()
        downloads.proxySettingsChanged()
    }

    /// The settings' downloader numbers, where they give them (at start and at each reload).
    private func applyDownloaderSettings() {
        do {
            if let n = options.maximumActiveDownloads { try downloads.setMaximumActiveDownloads(n) }
            if let order = options.downloadPrioritization { try downloads.setPrioritization(order) }
            if let bytes = options.diskCapacity { try downloads.setDiskCapacity(bytes) }
        } catch {
            context.logger.warning("Downloader settings not applied: \(error.message)")
        }
    }

    /// The settings file's cache limits (at start and at each reload, as the delays: what a host
    /// app set in between gives way to the file).
    private func applyCacheLimits() {
        typealias Cache = AutoPurgingImageCache<CachedImage>
        let image = options.imageCacheLimits.over(defaults: (Cache.defaultCapacity, Cache.defaultPreferred))
        do {
            try images.setCacheLimits(capacity: image.capacity, preferred: image.preferred)
        } catch {
            context.logger.warning("Image cache limits not changed: \(error)")
        }
        let decoded = options.decodedCacheLimits.over(
            defaults: (PixelTier.defaultCapacity, PixelTier.defaultPreferred))
        do {
            try images.setDecodedLimits(capacity: decoded.capacity, preferred: decoded.preferred)
        } catch {
            context.logger.warning("Decoded tier limits not changed: \(error)")
        }
    }

    /// Starts the tray and the notifier the options ask for, and stops those they no longer do.
    private func startDesktopObservers() {
        if options.tray, tray == nil {
            let icon = TrayIcon(
                connection: connection, server: context.server, scheduler: context.scheduler, indicator: activity,
                tasks: bound(tasks) { $0.menuRows(limit: TrayMenuModel.maxRows) }, logger: context.logger,
                request: bound(tasks) { tasks, action, sender in
                    guard case .request(let request, let path) = action else { return }
                    try? tasks.request(request, task: path, by: sender)
                },
                // The menu pauses the indicator and asks apps to stop their work: a host's (the
                // tray host's) to use, never a sandboxed app's.
                mayAct: { [context] in !context.peers.identity(of: $0).isSandboxed })
            tray = startObserver(icon) ? icon : nil
        } else if !options.tray, let icon = tray {
            icon.stop()
            tray = nil
        }
        tasks.onTasksChanged = tray.map { bound($0) { $0.tasksChanged() } }
        if notifier?.after != options.notifyAfter {
            notifier?.stop()
            notifier = nil
            if let after = options.notifyAfter {
                let n = ActivityNotifier(
                    connection: connection, scheduler: context.scheduler, indicator: activity, logger: context.logger,
                    after: after)
                notifier = startObserver(n) ? n : nil
                // A notifier turned on while the indicator shows counts from now.
                if activity.isVisible { notifier?.visibleChanged(true) }
            }
        }
        activity.observers = ([tray, notifier] as [(any DesktopObserver)?]).compactMap { $0 }
    }

    /// The desktop extras are optional: one that cannot start is logged, never fatal.
    private func startObserver(_ observer: any DesktopObserver) -> Bool {
        do {
            try observer.start()
            return true
        } catch {
            context.logger.warning("\(type(of: observer)) is off: \(error)")
            return false
        }
    }

    private func startMemoryPressure() {
        let monitor = MemoryPressureMonitor(
            loop: loop, logger: context.logger,
            onPressure: bound(self) { me, critical, source in me.memoryPressure(critical: critical, source: source) })
        let triggers = monitor.startPSI()
        var lowMemory = false
        if let bus = connectSystemBus() {
            lowMemory = monitor.startLowMemoryMonitor(bus: bus)
        }
        context.logger.info(
            "Memory pressure: \(triggers) PSI triggers, LowMemoryMonitor \(lowMemory ? "followed" : "not available")")
        pressure = monitor
    }

    private func memoryPressure(critical: Bool, source: String) {
        images.memoryPressure(critical: critical, source: source)
        let decoded = images.pixels.trim(critical: critical)
        if decoded > 0 { context.logger.notice("Memory pressure: let go of \(decoded) decoded images") }
    }

    /// The system bus (`options.systemBusAddress`, else the standard one), once; nil without one.
    private func connectSystemBus() -> Connection? {
        if let systemBus { return systemBus }
        guard let address = options.systemBusAddress ?? MemoryPressureMonitor.systemBusAddress(), !address.isEmpty
        else { return nil }
        do {
            let bus = try Connection(address: address)
            bus.attach(to: loop)
            bus.onDisconnect = { [weak self] in
                self?.context.logger.debug("The system bus went away; memory warnings and system conditions stop")
                self?.systemBus = nil
                self?.downloads.conditions.set(SystemConditions.State())
            }
            systemBus = bus
            return bus
        } catch {
            context.logger.debug("No system bus at \(address): \(error.message)")
            return nil
        }
    }

    /// Metered connections and power-saver hold very-low downloads (as the settings say).
    private func startSystemConditions() {
        downloads.conditions.set(options.deferral)
        guard let bus = connectSystemBus() else { return }
        let conditions = SystemConditions(
            bus: bus, logger: context.logger, onChange: bound(downloads) { $0.conditions.set($1) })
        // Transfers stop before sleep and go on after it; the inhibitor is held only while
        // they run (onRunning), so `sleep()` stopping them lets it go at once.
        conditions.onSleep = bound(downloads) { downloads, start in
            if start { downloads.conditions.sleep() } else { downloads.conditions.wake() }
        }
        downloads.conditions.onRunning = { [weak conditions] running in conditions?.holdSleep(running) }
        conditions.start()
        self.conditions = conditions
    }
}
