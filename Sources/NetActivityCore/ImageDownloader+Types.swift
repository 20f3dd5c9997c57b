// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import NetActivityContract

/// What `ImageDownloader` takes and gives: its failures, tickets, fetched bodies and requests, and
/// the observer it tells of each transfer.
extension ImageDownloader {
    public enum Failure: Error, Equatable, Sendable {
        case cancelled
        /// The fetcher's or the store's error (e.g. `.http`, `.timeout`, `.notAnImage`), with its message.
        case failed(NetActivityError)
    }

    /// What `download` answered.
    public enum Ticket: Equatable, Sendable {
        /// A cache hit: nothing to wait for, no receipt, no handler call.
        case cached
        /// The handler will be called once, with this receipt.
        case receipt(String, transfer: UInt64)
    }

    /// What a fetch delivers: the body where the transport put it (the agent's sealed memfd, or
    /// an array), handed to `store` as it is, never copied here.
    public struct Fetched: Sendable {
        public let body: any FetchedBody
        /// The HTTP status of the transfer that delivered it (200, or 304 for a revalidated disk
        /// copy); 0 when no transfer ran (a fresh disk hit).
        public var httpStatus: UInt32 = 0
        /// What the body is, sniffed once here (every receipt of a merged transfer shares it).
        public let info: ImageInfo?
        public init(body: any FetchedBody, httpStatus: UInt32 = 0, info: ImageInfo?? = nil) {
            self.body = body
            self.httpStatus = httpStatus
            self.info = info ?? body.withUnsafeBytes { ImageInfo.sniff($0) }
        }
        public init(bytes: [UInt8]) { self.init(body: bytes) }
        /// A copy of the body (for tests).
        public var bytes: [UInt8] { body.withUnsafeBytes { Array($0.bindMemory(to: UInt8.self)) } }
    }

    public struct Request: Equatable, Sendable {
        public let url: String
        public let key: String
        /// Skip every cache (memory and disk) for this transfer.
        public let reload: Bool
        public let transfer: UInt64
        /// The app of the first waiter: what the transfer stores is charged to it.
        public var app: String = ""
        /// Seconds a cached copy may be old for this transfer, when a waiter said (the smallest
        /// any waiter said while it was queued): the fetch holds the disk's copy to it.
        public var maxAge: Double?
        /// It may connect to public addresses only: a sandboxed or unknown caller asked for it.
        public var publicOnly = false
    }

    /// Events for the driver (task objects, activity, progress on the bus).
    public protocol Observer: AnyObject {
        func transferQueued(_ transfer: UInt64, url: String)
        func transferStarted(_ transfer: UInt64, url: String)
        func transferProgress(_ transfer: UInt64, received: UInt64, expected: UInt64)
        func transferEnded(_ transfer: UInt64, outcome: Result<Void, Failure>)
        /// A running transfer was stopped and waits in the queue again (`pauseAll`).
        func transferPaused(_ transfer: UInt64)
    }
}
