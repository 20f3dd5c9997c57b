// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// Limits that keep one client from costing the others (docs/bus-api.md, "Limits and their errors"). The agent enforces
/// them; the client library cuts what it sends to fit them.
public enum NetActivityLimits {
    /// Longest `reason` for BeginActivity, in bytes.
    public static let maxReasonBytes = 1024
    /// Most reasons the `Reasons` property lists for one client (its first distinct ones).
    public static let maxReasonsPerClient = 8
    /// Delays are seconds in 0...60.
    public static let maxDelaySeconds = 60.0
    /// Longest task description and completion error, in bytes.
    public static let maxDescriptionBytes = 1024
    public static let maxTaskErrorBytes = 1024
    /// Tasks one client may have running or suspended at once.
    public static let maxLiveTasksPerClient = 1024
    /// Longest image identifier, request URL and additional identifier, in bytes.
    public static let maxImageKeyBytes = 4096
    /// The largest `max-age` a request may give (seconds): a year, as HTTP caching's own bound.
    public static let maxRequestMaxAge = 365 * 24 * 3600
    /// The longest receipt a caller may choose for `FetchImage` (bytes).
    public static let maxReceiptBytes = 255
    /// The longest app name `Accounts` takes (bytes): a Flatpak id or a unit name is at most 255.
    public static let maxAppNameBytes = 512
    /// Downloads one client may wait for at once.
    public static let maxPendingDownloadsPerClient = 1024
    /// The most image bytes `AddImage`/`LookupImage` carry inline (`ay`); larger images go by
    /// fd (`AddImageFromFd`, `OpenImage`), so that no reply of megabytes piles up in the bus for
    /// a client that does not read, and no call holds the loop copying them.
    public static let maxInlineImageBytes = 1 << 20
    /// The largest call the agent takes: an inline image and its key, with room to spare.
    /// Anything larger is refused before it is looked at (`TooLarge`).
    public static let maxCallBytes = maxInlineImageBytes + 64 * 1024
    /// The largest MemoryCapacity and DiskCapacity that may be set (1 TiB).
    public static let maxCacheCapacity: UInt64 = 1 << 40
    /// The largest download body, whatever the cache's capacity: the largest image `LookupImage`
    /// can return (a D-Bus array holds at most 64 MiB), so what the downloader accepts, every
    /// documented read path delivers.
    public static let maxDownloadBytes = 64 << 20
    /// Response bytes all running downloads may hold before they complete, given the largest body
    /// one may have: four bodies (an app's share is one). A transfer past its app's share or the
    /// budget pauses (the server waits) until bytes are free again; the oldest running transfer,
    /// and each app's oldest while the budget holds, never pause, so one always moves on. Without
    /// this, 64 active transfers of 64 MiB each could make the agent hold 4 GiB.
    public static func bodiesInFlight(largestBody: Int) -> Int { 4 * largestBody }
    /// `MaximumActiveDownloads` may be set within this range.
    public static let activeDownloads: ClosedRange<UInt32> = 1...64
    /// Completed tasks kept for observers, over all clients; past this the oldest leave early.
    public static let maxLingeringTasks = 4096

    /// Tasks running or suspended that apps hold, before shares apply: while fewer are held,
    /// anyone may begin one; past it, only apps (and processes of the unscoped pool) under their
    /// fair share (`FairQuota`).
    public static let liveTasksBudget = 3276
    /// Task objects in the object tree (GetManagedObjects, InterfacesAdded), shared fairly between
    /// apps; up to `listedTasksLimit` (2.5 times as many) while apps under their share list theirs.
    /// The tree's reply then stays around 1 MB, whatever apps do.
    public static let listedTasksBudget = 200
    public static let listedTasksLimit = 500

    /// Tasks running or suspended over all clients, the hard limit. With the downloads' own cap and the lingering
    /// tasks, GetManagedObjects stays far below the bus's 64 MiB array limit: (8,192 + 8,192) live
    /// objects of at most ~1.5 KB and 4,096 completed ones of at most ~2.5 KB (a 1 KiB error) is
    /// about 35 MB (a reply past 64 MiB would get the agent dropped by the bus).
    public static let maxLiveTasks = 8192
    /// Downloads waited for over all clients (each queued transfer is a task object too), the
    /// hard limit; shares apply past 40 % of it (`pendingDownloadsBudget`).
    public static let maxPendingDownloads = 8192
    public static let pendingDownloadsBudget = 3276
    /// Prefetched URLs waiting (not yet tried) that one app may have, over all its prefetches and
    /// connections; and over all clients, the hard limit, with shares past the budget.
    public static let maxPrefetchURLsPerApp = 4096
    public static let maxPrefetchURLs = 16384
    public static let prefetchURLsBudget = 8192

    /// Leases over all clients: half the open-file limit, so that however many connections ask,
    /// the agent keeps descriptors for its own work (bus messages carrying fds, images, HTTP).
    /// Shares apply past 40 % of that (`FairQuota`'s budget).
    public static func leasesInAll(fileLimit: UInt64) -> Int {
        Int(max(2, fileLimit / 2))
    }

    /// Leases (each an fd in the agent) one client may hold: 256, or a sixteenth of the open-file
    /// limit when that is lower, so that one client cannot take the agent's descriptors.
    public static func leasesPerClient(fileLimit: UInt64) -> UInt32 {
        UInt32(min(256, max(1, fileLimit / 16)))
    }

    /// Cached images held in memfds (an fd each) over all clients: 4,096, or an eighth of the
    /// open-file limit when lower. Past that, images are kept in plain memory (OpenImage then
    /// copies into a new memfd per call).
    public static func memfdImages(fileLimit: UInt64) -> Int {
        Int(min(4096, fileLimit / 8))
    }

    /// Decoded entries (a memfd each) the decoded tier keeps: 4,096, or an eighth of the open-file
    /// limit when lower. The tier charges each entry at least its capacity divided by this (a
    /// descriptor's worth, and at least a page), so its byte limits bound its descriptors too, and
    /// its fair eviction shares them.
    public static func memfdPixels(fileLimit: UInt64) -> Int {
        Int(max(16, min(4096, fileLimit / 8)))
    }

    /// Images waiting for a decoder (a descriptor each) over all apps: 256, or a thirty-second of
    /// the open-file limit when lower.
    public static func decoderWaiting(fileLimit: UInt64) -> Int {
        Int(max(16, min(256, fileLimit / 32)))
    }
    /// Images one app may have waiting for a decoder (each process of the unscoped pool counts as
    /// an app of its own here).
    public static let maxDecoderWaitingPerApp = 16

    /// Connections that follow the whole task tree (signals of every task they may see): past the
    /// budget only an app under its share is admitted (the unscoped pool as one app), up to the
    /// limit; one per connection.
    public static let treeReadersBudget = 128
    public static let maxTreeReaders = 320

    /// Peers that follow one task directly (they read its properties) and hear its signals; past
    /// it the one that began to follow first stops hearing.
    public static let maxFollowersPerTask = 16

    /// The most pixels the agent takes for one decoded image (128 MiB of BGRA): a request whose
    /// pixels, fit to its box, would be more is TooLarge, known from the image's header.
    public static let maxDecodedPixels: UInt64 = 32 << 20
    /// The most pixels a decoder reads for one image, whatever its box (a JPEG scaled in its IDCT,
    /// or a progressive one, holds the whole source's coefficients): beyond it TooLarge, from the
    /// header.
    public static let maxSourcePixels: UInt64 = 128 << 20
    /// The most frames of an animation one FetchPixels or OpenPixels answers with (its
    /// "max-frames" when absent, and its ceiling); all of them are held to `maxDecodedPixels`.
    public static let maxAnimationFrames: UInt32 = 1000

    /// Transfers running at once (each holding a slot or yielded), over all apps: each is a socket.
    public static let maxRunningTransfers = 256

    /// Bytes of calls the agent holds for peers it does not know yet (or that do not read their
    /// replies), over all of them: libdbus stops reading at 63 MiB of messages it holds, and the
    /// answers the agent waits for must still get through. Past it a call is refused (TooLarge).
    public static let maxHeldCallBytes = 24 << 20

    /// Disk-cache writes handed to the disk worker and not yet done, and their bytes: past either,
    /// a write is skipped (the image is in memory; the next download writes it).
    public static let maxQueuedDiskWrites = 1024
    public static let maxQueuedDiskBytes = 128 << 20
    // Leases (a half), images and pixels (an eighth each) and waiting decodes (a thirty-second)
    // leave the agent at least 7/32 of its open-file limit for its own work: the bus connection and
    // the descriptors messages carry, identity reads, the decoders' sockets, HTTP, the disk.
}
