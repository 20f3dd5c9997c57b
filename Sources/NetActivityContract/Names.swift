/// The names of the contract (`../shared/DESIGN.md`, `dbus/*.xml`): the one place they are spelled.
/// The agent, the client library, the CLI and the bench all use these; nothing else writes a bus
/// name, path, interface, member or property name of ours as a string.
public enum NetActivityBus {
    /// The well-known name the agent owns on the session bus.
    public static let name = "org.example.NetActivity"
    /// The agent's object; also an `org.freedesktop.DBus.ObjectManager` for the task objects.
    public static let objectPath = "/org/example/NetActivity"
    /// Task objects are this prefix plus a number.
    public static let taskPathPrefix = "/org/example/NetActivity/tasks/"
    /// The `Version` property of every interface. A breaking change is a new interface name.
    public static let version: UInt32 = 1
}

/// A key of an `a{sv}` options argument, with the D-Bus type its value must have.
public protocol MethodOption: RawRepresentable, CaseIterable where RawValue == String {
    var signature: String { get }
}

/// The interfaces the agent serves.
public enum NetActivityInterface: String, Sendable, CaseIterable {
    case activity = "org.example.NetActivity"
    case task = "org.example.NetActivity.Task"
    case imageCache = "org.example.NetActivity.ImageCache"
    case downloader = "org.example.NetActivity.Downloader"
}

/// `org.example.NetActivity`: counts, leases, tasks, and the indicator.
public enum ActivityMember {
    public enum Method: String, Sendable, CaseIterable {
        case incrementActivityCount = "IncrementActivityCount"
        case decrementActivityCount = "DecrementActivityCount"
        case beginActivity = "BeginActivity"
        case beginTask = "BeginTask"
    }

    public enum Property: String, Sendable, CaseIterable {
        case version = "Version"
        case enabled = "Enabled"
        case visible = "Visible"
        case state = "State"
        case activityCount = "ActivityCount"
        case activationDelay = "ActivationDelay"
        case completionDelay = "CompletionDelay"
        case clients = "Clients"
        case reasons = "Reasons"
    }

    public enum Signal: String, Sendable, CaseIterable {
        case visible = "Visible"
    }

    /// The `State` property's values: the four states of AFNetworkActivityIndicatorManager.
    public enum IndicatorState: String, Sendable, CaseIterable {
        case notActive = "not-active"
        case delayingStart = "delaying-start"
        case active = "active"
        case delayingEnd = "delaying-end"
    }
}

/// `org.example.NetActivity.Task`: one observable unit of work.
public enum TaskMember {
    /// Why `id` is not a valid `desktop-id` (a desktop file name such as `org.example.App.desktop`:
    /// letters, digits, '.', '_', '-', at most 255 bytes), or nil when it is.
    public static func desktopIDProblem(_ id: String) -> String? {
        let allowed = { (c: UInt8) in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E || c == 0x5F || c == 0x2D
        }
        if id.utf8.count <= 255, id.hasSuffix(".desktop"), id.utf8.count > 8, id.utf8.allSatisfy(allowed) { return nil }
        return "BeginTask option 'desktop-id' must be a desktop file name like 'org.example.App.desktop' (letters, digits, '.', '_', '-'; at most 255 bytes), got '\(id.prefix(300))'"
    }

    public enum Method: String, Sendable, CaseIterable {
        case suspend = "Suspend"
        case resume = "Resume"
        case complete = "Complete"
        case setProgress = "SetProgress"
        case setFraction = "SetFraction"
    }

    public enum Property: String, Sendable, CaseIterable {
        case version = "Version"
        case state = "State"
        case description = "Description"
        case owner = "Owner"
        case countOfBytesSent = "CountOfBytesSent"
        case countOfBytesExpectedToSend = "CountOfBytesExpectedToSend"
        case countOfBytesReceived = "CountOfBytesReceived"
        case countOfBytesExpectedToReceive = "CountOfBytesExpectedToReceive"
        case fractionCompleted = "FractionCompleted"
        case error = "Error"
    }

    /// `BeginTask` options (a{sv}) and their D-Bus types.
    public enum Option: String, Sendable, MethodOption {
        case suspended = "suspended"
        case expectedToSend = "expected-to-send"
        case expectedToReceive = "expected-to-receive"
        case desktopID = "desktop-id"

        public var signature: String {
            switch self {
            case .suspended: "b"
            case .expectedToSend, .expectedToReceive: "t"
            case .desktopID: "s"
            }
        }
    }

    /// The `State` property's values.
    public enum State: String, Sendable, CaseIterable {
        case running, suspended, completed
    }
}

/// `org.example.NetActivity.ImageCache`: one shared in-memory image cache.
public enum ImageCacheMember {
    public enum Method: String, Sendable, CaseIterable {
        case addImage = "AddImage"
        case addImageForRequest = "AddImageForRequest"
        case addImageFromFd = "AddImageFromFd"
        case addImageFromFdForRequest = "AddImageFromFdForRequest"
        case lookupImage = "LookupImage"
        case lookupImageForRequest = "LookupImageForRequest"
        case openImage = "OpenImage"
        case openImageForRequest = "OpenImageForRequest"
        case removeImage = "RemoveImage"
        case removeImageForRequest = "RemoveImageForRequest"
        case removeAllImages = "RemoveAllImages"
    }

    public enum Property: String, Sendable, CaseIterable {
        case version = "Version"
        case memoryCapacity = "MemoryCapacity"
        case preferredMemoryUsageAfterPurge = "PreferredMemoryUsageAfterPurge"
        case memoryUsage = "MemoryUsage"
        case imageCount = "ImageCount"
        case memoryUsageByApp = "MemoryUsageByApp"
        case statistics = "Statistics"
    }
}

/// `org.example.NetActivity.Downloader`: one shared image downloader.
public enum DownloaderMember {
    public enum Method: String, Sendable, CaseIterable {
        case downloadImage = "DownloadImage"
        case fetchImage = "FetchImage"
        case cancelDownload = "CancelDownload"
    }

    public enum Property: String, Sendable, CaseIterable {
        case version = "Version"
        case maximumActiveDownloads = "MaximumActiveDownloads"
        case downloadPrioritization = "DownloadPrioritization"
        case activeDownloads = "ActiveDownloads"
        case queuedDownloads = "QueuedDownloads"
        case diskCapacity = "DiskCapacity"
        case diskUsage = "DiskUsage"
        case diskError = "DiskError"
    }

    public enum Signal: String, Sendable, CaseIterable {
        case downloadFinished = "DownloadFinished"
    }

    /// `DownloadImage` options (a{sv}) and their D-Bus types.
    public enum Option: String, Sendable, MethodOption {
        case additionalIdentifier = "additional-identifier"
        case reload = "reload"

        public var signature: String {
            switch self {
            case .additionalIdentifier: "s"
            case .reload: "b"
            }
        }
    }

    /// `FetchImage` options (a{sv}) and their D-Bus types.
    public enum FetchOption: String, Sendable, MethodOption {
        case additionalIdentifier = "additional-identifier"
        case reload = "reload"
        /// The caller's name for the call, unique among its pending ones: `CancelDownload` takes it.
        case receipt = "receipt"
        /// Publish the transfer's task object at once, not only once it has run for ActivationDelay.
        case announce = "announce"

        public var signature: String {
            switch self {
            case .additionalIdentifier, .receipt: "s"
            case .reload, .announce: "b"
            }
        }
    }

    /// The keys of `FetchImage`'s `info` (a{sv}).
    public enum FetchInfo: String, Sendable, CaseIterable {
        /// `memory`, `disk` or `network` (s).
        case source = "source"
        /// The media type of the bytes, as sniffed (s).
        case contentType = "content-type"
        /// The HTTP status of the transfer that delivered them (u), where one ran: 200, or 304
        /// for a disk copy the server confirmed.
        case httpStatus = "http-status"
    }

    /// `FetchImage`'s `source`.
    public enum FetchSource: String, Sendable, CaseIterable {
        case memory, disk, network
    }
}
