// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// Generated from dbus/*.xml by scripts/gen-contract.py (make contract). Do not edit: a test
// fails when this differs from what the XML makes. Hand-written additions are in Contract.swift.

/// The names of the contract (`dbus/*.xml`, docs/behaviour.md). The agent, the client
/// library, the CLI and the bench take every bus name, path, interface, member, property,
/// enumerated value, option key and error name of ours from here.
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

/// The interfaces the agent serves.
public enum NetActivityInterface: String, Sendable, CaseIterable {
    case activity = "org.example.NetActivity"
    case downloader = "org.example.NetActivity.Downloader"
    case imageCache = "org.example.NetActivity.ImageCache"
    case task = "org.example.NetActivity.Task"
}

/// `org.example.NetActivity`.
public enum ActivityMember: ContractInterface {
    public static let interface = NetActivityInterface.activity

    /// Its methods.
    public enum Method: String, Sendable, CaseIterable, ContractMethod {
        case incrementActivityCount = "IncrementActivityCount"
        case decrementActivityCount = "DecrementActivityCount"
        case beginActivity = "BeginActivity"
        case beginTask = "BeginTask"
        case accounts = "Accounts"

        public var inArguments: [ContractArgument] {
            switch self {
            case .incrementActivityCount, .decrementActivityCount: []
            case .beginActivity: [.init("reason", "s")]
            case .beginTask: [.init("description", "s"), .init("options", "a{sv}")]
            case .accounts: [.init("app", "s")]
            }
        }

        public var outArguments: [ContractArgument] {
            switch self {
            case .incrementActivityCount, .decrementActivityCount: []
            case .beginActivity: [.init("lease", "h")]
            case .beginTask: [.init("task", "o")]
            case .accounts: [.init("accounts", "a(sstttt)")]
            }
        }
    }

    /// Its properties.
    public enum Property: String, Sendable, CaseIterable, ContractProperty {
        case version = "Version"
        case enabled = "Enabled"
        case visible = "Visible"
        case state = "State"
        case activityCount = "ActivityCount"
        case activationDelay = "ActivationDelay"
        case completionDelay = "CompletionDelay"
        case clients = "Clients"
        case reasons = "Reasons"

        public var signature: String {
            switch self {
            case .version, .activityCount: "u"
            case .enabled, .visible: "b"
            case .state: "s"
            case .activationDelay, .completionDelay: "d"
            case .clients: "a(ssu)"
            case .reasons: "a{sas}"
            }
        }

        public var isWritable: Bool {
            switch self {
            case .enabled, .activationDelay, .completionDelay: true
            case .version, .visible, .state, .activityCount, .clients, .reasons: false
            }
        }

        public var emitsChanged: ContractEmitsChanged {
            switch self {
            case .version: .const
            case .enabled, .visible, .state, .activityCount, .activationDelay, .completionDelay, .clients: .true
            case .reasons: .invalidates
            }
        }
    }

    /// Its signals.
    public enum Signal: String, Sendable, CaseIterable, ContractSignal {
        case visible = "Visible"

        public var arguments: [ContractArgument] {
            switch self {
            case .visible: [.init("visible", "b")]
            }
        }
    }

    public static var signals: [any ContractSignal] { Signal.allCases }

    /// `Resource`: the values several members take.
    public enum Resource: String, Sendable, CaseIterable {
        case leases
        case tasks
        case listedTasks = "listed-tasks"
        case treeReaders = "tree-readers"
        case downloads
        case prefetchURLs = "prefetch-urls"
        case decoderQueue = "decoder-queue"
        case bytesInFlight = "bytes-in-flight"
        case images
        case pixels
        case disk
    }

    /// `State`'s values.
    public enum State: String, Sendable, CaseIterable {
        case notActive = "not-active"
        case delayingStart = "delaying-start"
        case active
        case delayingEnd = "delaying-end"
    }

    /// `BeginTask`'s `options` keys (a{sv}) and their D-Bus types.
    public enum BeginTaskOption: String, Sendable, MethodOption {
        case suspended
        case expectedToSend = "expected-to-send"
        case expectedToReceive = "expected-to-receive"
        case desktopID = "desktop-id"
        case cancellable
        case suspendable

        public var signature: String {
            switch self {
            case .suspended, .cancellable, .suspendable: "b"
            case .expectedToSend, .expectedToReceive: "t"
            case .desktopID: "s"
            }
        }
    }
}

/// `org.example.NetActivity.Downloader`.
public enum DownloaderMember: ContractInterface {
    public static let interface = NetActivityInterface.downloader

    /// Its methods.
    public enum Method: String, Sendable, CaseIterable, ContractMethod {
        case downloadImage = "DownloadImage"
        case fetchImage = "FetchImage"
        case fetchPixels = "FetchPixels"
        case cancelDownload = "CancelDownload"
        case setPriority = "SetPriority"
        case prefetchImages = "PrefetchImages"
        case cancelPrefetch = "CancelPrefetch"
        case removeImages = "RemoveImages"

        public var inArguments: [ContractArgument] {
            switch self {
            case .downloadImage, .fetchImage, .fetchPixels: [.init("url", "s"), .init("options", "a{sv}")]
            case .cancelDownload: [.init("receipt", "s")]
            case .setPriority: [.init("receipt", "s"), .init("priority", "s")]
            case .prefetchImages: [.init("urls", "as"), .init("options", "a{sv}")]
            case .cancelPrefetch: [.init("receipt", "s"), .init("urls", "as")]
            case .removeImages: [.init("prefix", "s")]
            }
        }

        public var outArguments: [ContractArgument] {
            switch self {
            case .downloadImage: [.init("receipt", "s"), .init("task", "o"), .init("cached", "b")]
            case .fetchImage: [.init("image", "h"), .init("size", "t"), .init("info", "a{sv}")]
            case .fetchPixels: [.init("pixels", "h"), .init("info", "a{sv}")]
            case .cancelDownload: [.init("cancelled", "b")]
            case .setPriority: [.init("changed", "b")]
            case .prefetchImages: [.init("receipt", "s")]
            case .cancelPrefetch: [.init("cancelled", "u")]
            case .removeImages: [.init("removed", "u")]
            }
        }
    }

    /// Its properties.
    public enum Property: String, Sendable, CaseIterable, ContractProperty {
        case version = "Version"
        case maximumActiveDownloads = "MaximumActiveDownloads"
        case downloadPrioritization = "DownloadPrioritization"
        case activeDownloads = "ActiveDownloads"
        case queuedDownloads = "QueuedDownloads"
        case diskCapacity = "DiskCapacity"
        case diskUsage = "DiskUsage"
        case diskError = "DiskError"
        case proxy = "Proxy"
        case deferred = "Deferred"

        public var signature: String {
            switch self {
            case .version, .maximumActiveDownloads, .activeDownloads, .queuedDownloads: "u"
            case .downloadPrioritization, .diskError, .proxy: "s"
            case .diskCapacity, .diskUsage: "t"
            case .deferred: "a{sv}"
            }
        }

        public var isWritable: Bool {
            switch self {
            case .maximumActiveDownloads, .downloadPrioritization, .diskCapacity: true
            case .version, .activeDownloads, .queuedDownloads, .diskUsage, .diskError, .proxy, .deferred: false
            }
        }

        public var emitsChanged: ContractEmitsChanged {
            switch self {
            case .version: .const
            case .maximumActiveDownloads, .downloadPrioritization, .diskCapacity: .true
            case .activeDownloads, .queuedDownloads, .diskUsage, .diskError, .proxy: .false
            case .deferred: .invalidates
            }
        }
    }

    /// Its signals.
    public enum Signal: String, Sendable, CaseIterable, ContractSignal {
        case prefetchFinished = "PrefetchFinished"
        case downloadFinished = "DownloadFinished"

        public var arguments: [ContractArgument] {
            switch self {
            case .prefetchFinished: [.init("receipt", "s"), .init("stored", "u"), .init("failed", "u")]
            case .downloadFinished:
                [.init("receipt", "s"), .init("url", "s"), .init("ok", "b"), .init("error_name", "s"), .init("error_message", "s")]
            }
        }
    }

    public static var signals: [any ContractSignal] { Signal.allCases }

    /// `Priority`: the values several members take.
    public enum Priority: String, Sendable, CaseIterable {
        case veryLow = "very-low"
        case low
        case normal
        case high
        case veryHigh = "very-high"
    }

    /// The values of `FetchImage`'s `info` key `source`.
    public enum FetchImageSource: String, Sendable, CaseIterable {
        case memory
        case disk
        case network
    }

    /// The values of `FetchPixels`'s `options` key `color`.
    public enum FetchPixelsColor: String, Sendable, CaseIterable {
        case srgb
        case asIs = "as-is"
    }

    /// The values of `FetchPixels`'s `info` key `format`.
    public enum FetchPixelsFormat: String, Sendable, CaseIterable {
        case b8g8r8a8Premultiplied = "B8G8R8A8_PREMULTIPLIED"
    }

    /// The values of `FetchPixels`'s `info` key `color-space`. The same as `FetchPixelsColor`'s.
    public typealias FetchPixelsColorSpace = FetchPixelsColor

    /// The values of `FetchPixels`'s `info` key `color-profile`.
    public enum FetchPixelsColorProfile: String, Sendable, CaseIterable {
        case none
        case icc
        case cicp
        case invalid
    }

    /// The values of `FetchPixels`'s `info` key `source`. The same as `FetchImageSource`'s.
    public typealias FetchPixelsSource = FetchImageSource

    /// `DownloadPrioritization`'s values.
    public enum DownloadPrioritization: String, Sendable, CaseIterable {
        case fifo
        case lifo
    }

    /// `DownloadImage`'s `options` keys (a{sv}) and their D-Bus types.
    public enum DownloadImageOption: String, Sendable, MethodOption {
        case additionalIdentifier = "additional-identifier"
        case reload
        case priority
        case cacheKey = "cache-key"
        case maxAge = "max-age"

        public var signature: String {
            switch self {
            case .additionalIdentifier, .priority, .cacheKey: "s"
            case .reload: "b"
            case .maxAge: "d"
            }
        }
    }

    /// `FetchImage`'s `options` keys (a{sv}) and their D-Bus types.
    public enum FetchImageOption: String, Sendable, MethodOption {
        case additionalIdentifier = "additional-identifier"
        case reload
        case priority
        case cacheKey = "cache-key"
        case maxAge = "max-age"
        case receipt
        case announce

        public var signature: String {
            switch self {
            case .additionalIdentifier, .priority, .cacheKey, .receipt: "s"
            case .reload, .announce: "b"
            case .maxAge: "d"
            }
        }
    }

    /// The keys of `FetchImage`'s `info` and their D-Bus types.
    public enum FetchImageInfo: String, Sendable, DictionaryKey {
        case source
        case contentType = "content-type"
        case httpStatus = "http-status"

        public var signature: String {
            switch self {
            case .source, .contentType: "s"
            case .httpStatus: "u"
            }
        }
    }

    /// `FetchPixels`'s `options` keys (a{sv}) and their D-Bus types.
    public enum FetchPixelsOption: String, Sendable, MethodOption {
        case additionalIdentifier = "additional-identifier"
        case reload
        case priority
        case cacheKey = "cache-key"
        case maxAge = "max-age"
        case receipt
        case announce
        case maxWidth = "max-width"
        case maxHeight = "max-height"
        case color
        case animation
        case maxFrames = "max-frames"

        public var signature: String {
            switch self {
            case .additionalIdentifier, .priority, .cacheKey, .receipt, .color: "s"
            case .reload, .announce, .animation: "b"
            case .maxAge: "d"
            case .maxWidth, .maxHeight, .maxFrames: "u"
            }
        }
    }

    /// The keys of `FetchPixels`'s `info` and their D-Bus types.
    public enum FetchPixelsInfo: String, Sendable, DictionaryKey {
        case width
        case height
        case stride
        case format
        case originalWidth = "original-width"
        case originalHeight = "original-height"
        case frames
        case frameDurations = "frame-durations"
        case loopCount = "loop-count"
        case colorSpace = "color-space"
        case colorProfile = "color-profile"
        case source
        case contentType = "content-type"
        case httpStatus = "http-status"

        public var signature: String {
            switch self {
            case .width, .height, .stride, .originalWidth, .originalHeight, .frames, .loopCount, .httpStatus: "u"
            case .format, .colorSpace, .colorProfile, .source, .contentType: "s"
            case .frameDurations: "au"
            }
        }
    }

    /// The keys of `Deferred` and their D-Bus types.
    public enum DeferredKey: String, Sendable, DictionaryKey {
        case metered
        case powerSaver = "power-saver"
        case held
        case prefetch

        public var signature: String {
            switch self {
            case .metered, .powerSaver: "b"
            case .held, .prefetch: "u"
            }
        }
    }
}

/// `org.example.NetActivity.ImageCache`.
public enum ImageCacheMember: ContractInterface {
    public static let interface = NetActivityInterface.imageCache

    /// Its methods.
    public enum Method: String, Sendable, CaseIterable, ContractMethod {
        case addImage = "AddImage"
        case addImageForRequest = "AddImageForRequest"
        case addImageFromFd = "AddImageFromFd"
        case addImageFromFdForRequest = "AddImageFromFdForRequest"
        case lookupImage = "LookupImage"
        case lookupImageForRequest = "LookupImageForRequest"
        case openImage = "OpenImage"
        case openPixels = "OpenPixels"
        case openImageForRequest = "OpenImageForRequest"
        case removeImage = "RemoveImage"
        case removeImageForRequest = "RemoveImageForRequest"
        case removeAllImages = "RemoveAllImages"

        public var inArguments: [ContractArgument] {
            switch self {
            case .addImage: [.init("identifier", "s"), .init("data", "ay")]
            case .addImageForRequest: [.init("url", "s"), .init("additional_identifier", "s"), .init("data", "ay")]
            case .addImageFromFd: [.init("identifier", "s"), .init("image", "h")]
            case .addImageFromFdForRequest:
                [.init("url", "s"), .init("additional_identifier", "s"), .init("image", "h")]
            case .lookupImage, .openImage, .removeImage: [.init("identifier", "s")]
            case .lookupImageForRequest, .openImageForRequest, .removeImageForRequest:
                [.init("url", "s"), .init("additional_identifier", "s")]
            case .openPixels: [.init("identifier", "s"), .init("options", "a{sv}")]
            case .removeAllImages: []
            }
        }

        public var outArguments: [ContractArgument] {
            switch self {
            case .addImage, .addImageForRequest, .addImageFromFd, .addImageFromFdForRequest: []
            case .lookupImage, .lookupImageForRequest: [.init("found", "b"), .init("data", "ay")]
            case .openImage, .openImageForRequest: [.init("fd", "h"), .init("size", "t")]
            case .openPixels: [.init("pixels", "h"), .init("info", "a{sv}")]
            case .removeImage, .removeImageForRequest, .removeAllImages: [.init("removed", "b")]
            }
        }
    }

    /// Its properties.
    public enum Property: String, Sendable, CaseIterable, ContractProperty {
        case version = "Version"
        case memoryCapacity = "MemoryCapacity"
        case preferredMemoryUsageAfterPurge = "PreferredMemoryUsageAfterPurge"
        case memoryUsage = "MemoryUsage"
        case decodedMemoryCapacity = "DecodedMemoryCapacity"
        case decodedPreferredMemoryUsageAfterPurge = "DecodedPreferredMemoryUsageAfterPurge"
        case decodedMemoryUsage = "DecodedMemoryUsage"
        case decodedStatistics = "DecodedStatistics"
        case imageCount = "ImageCount"
        case memoryUsageByApp = "MemoryUsageByApp"
        case statistics = "Statistics"

        public var signature: String {
            switch self {
            case .version, .imageCount: "u"
            case .memoryCapacity, .preferredMemoryUsageAfterPurge, .memoryUsage, .decodedMemoryCapacity, .decodedPreferredMemoryUsageAfterPurge, .decodedMemoryUsage:
                "t"
            case .decodedStatistics, .memoryUsageByApp, .statistics: "a{st}"
            }
        }

        public var isWritable: Bool {
            switch self {
            case .memoryCapacity, .preferredMemoryUsageAfterPurge, .decodedMemoryCapacity, .decodedPreferredMemoryUsageAfterPurge:
                true
            case .version, .memoryUsage, .decodedMemoryUsage, .decodedStatistics, .imageCount, .memoryUsageByApp, .statistics:
                false
            }
        }

        public var emitsChanged: ContractEmitsChanged {
            switch self {
            case .version: .const
            case .memoryCapacity, .preferredMemoryUsageAfterPurge, .decodedMemoryCapacity, .decodedPreferredMemoryUsageAfterPurge:
                .true
            case .memoryUsage, .decodedMemoryUsage, .decodedStatistics, .imageCount, .memoryUsageByApp, .statistics:
                .false
            }
        }
    }

    public static var signals: [any ContractSignal] { [] }

    /// The values of `OpenPixels`'s `options` key `color`.
    public enum OpenPixelsColor: String, Sendable, CaseIterable {
        case srgb
        case asIs = "as-is"
    }

    /// The values of `OpenPixels`'s `info` key `format`.
    public enum OpenPixelsFormat: String, Sendable, CaseIterable {
        case b8g8r8a8Premultiplied = "B8G8R8A8_PREMULTIPLIED"
    }

    /// The values of `OpenPixels`'s `info` key `color-space`. The same as `OpenPixelsColor`'s.
    public typealias OpenPixelsColorSpace = OpenPixelsColor

    /// The values of `OpenPixels`'s `info` key `color-profile`.
    public enum OpenPixelsColorProfile: String, Sendable, CaseIterable {
        case none
        case icc
        case cicp
        case invalid
    }

    /// The values of `OpenPixels`'s `info` key `source`.
    public enum OpenPixelsSource: String, Sendable, CaseIterable {
        case memory
    }

    /// `OpenPixels`'s `options` keys (a{sv}) and their D-Bus types.
    public enum OpenPixelsOption: String, Sendable, MethodOption {
        case maxWidth = "max-width"
        case maxHeight = "max-height"
        case color
        case animation
        case maxFrames = "max-frames"

        public var signature: String {
            switch self {
            case .maxWidth, .maxHeight, .maxFrames: "u"
            case .color: "s"
            case .animation: "b"
            }
        }
    }

    /// The keys of `OpenPixels`'s `info` and their D-Bus types.
    public enum OpenPixelsInfo: String, Sendable, DictionaryKey {
        case width
        case height
        case stride
        case format
        case originalWidth = "original-width"
        case originalHeight = "original-height"
        case frames
        case frameDurations = "frame-durations"
        case loopCount = "loop-count"
        case colorSpace = "color-space"
        case colorProfile = "color-profile"
        case source
        case contentType = "content-type"

        public var signature: String {
            switch self {
            case .width, .height, .stride, .originalWidth, .originalHeight, .frames, .loopCount: "u"
            case .format, .colorSpace, .colorProfile, .source, .contentType: "s"
            case .frameDurations: "au"
            }
        }
    }

    /// The keys of `DecodedStatistics` and their D-Bus types.
    public enum DecodedStatisticsKey: String, Sendable, DictionaryKey {
        case hits
        case misses
        case insertions
        case evictions
        case pressureModerate = "pressure-moderate"
        case pressureCritical = "pressure-critical"
        case pressureEvictions = "pressure-evictions"
        case pressureBytesFreed = "pressure-bytes-freed"
        case decodes
        case decodeFailures = "decode-failures"
        case sharedDecodes = "shared-decodes"
        case decodersStarted = "decoders-started"
        case decodersReplaced = "decoders-replaced"

        public var signature: String {
            switch self {
            case .hits, .misses, .insertions, .evictions, .pressureModerate, .pressureCritical, .pressureEvictions, .pressureBytesFreed, .decodes, .decodeFailures, .sharedDecodes, .decodersStarted, .decodersReplaced: "t"
            }
        }
    }

    /// The keys of `Statistics` and their D-Bus types.
    public enum StatisticsKey: String, Sendable, DictionaryKey {
        case hits
        case misses
        case insertions
        case evictions
        case pressureModerate = "pressure-moderate"
        case pressureCritical = "pressure-critical"
        case pressureEvictions = "pressure-evictions"
        case pressureBytesFreed = "pressure-bytes-freed"

        public var signature: String {
            switch self {
            case .hits, .misses, .insertions, .evictions, .pressureModerate, .pressureCritical, .pressureEvictions, .pressureBytesFreed: "t"
            }
        }
    }
}

/// `org.example.NetActivity.Task`.
public enum TaskMember: ContractInterface {
    public static let interface = NetActivityInterface.task

    /// Its methods.
    public enum Method: String, Sendable, CaseIterable, ContractMethod {
        case suspend = "Suspend"
        case resume = "Resume"
        case complete = "Complete"
        case setProgress = "SetProgress"
        case setFraction = "SetFraction"
        case requestCancel = "RequestCancel"
        case requestSuspend = "RequestSuspend"

        public var inArguments: [ContractArgument] {
            switch self {
            case .suspend, .resume, .requestCancel: []
            case .complete: [.init("error", "s")]
            case .setProgress:
                [.init("sent", "t"), .init("expected_to_send", "t"), .init("received", "t"), .init("expected_to_receive", "t")]
            case .setFraction: [.init("fraction", "d")]
            case .requestSuspend: [.init("suspended", "b")]
            }
        }

        public var outArguments: [ContractArgument] { [] }
    }

    /// Its properties.
    public enum Property: String, Sendable, CaseIterable, ContractProperty {
        case version = "Version"
        case state = "State"
        case cancellable = "Cancellable"
        case suspendable = "Suspendable"
        case description = "Description"
        case owner = "Owner"
        case countOfBytesSent = "CountOfBytesSent"
        case countOfBytesExpectedToSend = "CountOfBytesExpectedToSend"
        case countOfBytesReceived = "CountOfBytesReceived"
        case countOfBytesExpectedToReceive = "CountOfBytesExpectedToReceive"
        case fractionCompleted = "FractionCompleted"
        case error = "Error"

        public var signature: String {
            switch self {
            case .version: "u"
            case .state, .description, .owner, .error: "s"
            case .cancellable, .suspendable: "b"
            case .countOfBytesSent, .countOfBytesExpectedToSend, .countOfBytesReceived, .countOfBytesExpectedToReceive:
                "t"
            case .fractionCompleted: "d"
            }
        }

        public var isWritable: Bool { false }

        public var emitsChanged: ContractEmitsChanged {
            switch self {
            case .version, .cancellable, .suspendable, .description, .owner: .const
            case .state, .countOfBytesSent, .countOfBytesExpectedToSend, .countOfBytesReceived, .countOfBytesExpectedToReceive, .fractionCompleted, .error:
                .true
            }
        }
    }

    /// Its signals.
    public enum Signal: String, Sendable, CaseIterable, ContractSignal {
        case cancelRequested = "CancelRequested"
        case suspendRequested = "SuspendRequested"

        public var arguments: [ContractArgument] {
            switch self {
            case .cancelRequested: []
            case .suspendRequested: [.init("suspended", "b")]
            }
        }
    }

    public static var signals: [any ContractSignal] { Signal.allCases }

    /// `State`'s values.
    public enum State: String, Sendable, CaseIterable {
        case running
        case suspended
        case completed
    }
}

extension NetActivityError {
    /// Every error name of the contract: the agent's own, then the standard ones it, libdbus and
    /// the bus answer with.
    public enum Name: String, Sendable, CaseIterable {
        // org.example.NetActivity.Error.*
        case limitsExceeded = "org.example.NetActivity.Error.LimitsExceeded"
        case tooLarge = "org.example.NetActivity.Error.TooLarge"
        case invalidURL = "org.example.NetActivity.Error.InvalidURL"
        case http = "org.example.NetActivity.Error.HTTP"
        case timeout = "org.example.NetActivity.Error.Timeout"
        case notAnImage = "org.example.NetActivity.Error.NotAnImage"
        case network = "org.example.NetActivity.Error.Network"
        case cancelled = "org.example.NetActivity.Error.Cancelled"
        case offline = "org.example.NetActivity.Error.Offline"
        case notFound = "org.example.NetActivity.Error.NotFound"
        case decode = "org.example.NetActivity.Error.Decode"
        case clientVanished = "org.example.NetActivity.Error.ClientVanished"
        case notSupported = "org.example.NetActivity.Error.NotSupported"
        // org.freedesktop.DBus.Error.*
        case invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
        case accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
        case failed = "org.freedesktop.DBus.Error.Failed"
        case unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
        case unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
        case unknownInterface = "org.freedesktop.DBus.Error.UnknownInterface"
        case unknownProperty = "org.freedesktop.DBus.Error.UnknownProperty"
        case propertyReadOnly = "org.freedesktop.DBus.Error.PropertyReadOnly"
        case invalidSignature = "org.freedesktop.DBus.Error.InvalidSignature"
        case busLimitsExceeded = "org.freedesktop.DBus.Error.LimitsExceeded"
        case serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
        case nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
        case noReply = "org.freedesktop.DBus.Error.NoReply"
        case busTimeout = "org.freedesktop.DBus.Error.Timeout"
        case disconnected = "org.freedesktop.DBus.Error.Disconnected"
        case noServer = "org.freedesktop.DBus.Error.NoServer"
    }
}
