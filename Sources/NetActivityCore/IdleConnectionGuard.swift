// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later

/// Which of libcurl's connections sit idle in its pool, and so must stay silent until a transfer
/// takes them again. A server that sent more than its response's framing (bytes past
/// Content-Length: a whole forged response) would otherwise answer the next request to the same
/// origin from them, as libcurl checks an idle connection only after a second; the fetcher watches
/// the sockets this table calls idle, and one that turns readable is made dead.
///
/// The table is the rule; the fetcher does the watching. A socket is busy while libcurl wants
/// events on it; each socket remembers the last transfer named on it (libcurl's socket callback,
/// or the transfer that took a pooled connection). A transfer that finishes leaves its socket idle
/// only when it is still that socket's transfer, libcurl wants nothing of the socket, and the
/// connection is HTTP/1 (HTTP/2 carries frames while idle and frames its own data). A transfer
/// that took the connection and paused at once (the bytes in flight are full, or it yielded its
/// turn) has no libcurl interest either, and its response is on the way: it owns the socket, so
/// the previous transfer's finish does not make it idle.
public struct IdleConnectionGuard<Socket: Hashable, Transfer: Equatable> {
    public private(set) var busy: Set<Socket> = []
    public private(set) var idle: Set<Socket> = []
    private var owners: [Socket: Transfer] = [:]

    public init() {}

    /// libcurl wants events on `socket` for `transfer` (it may not name one).
    public mutating func wanted(_ socket: Socket, by transfer: Transfer?) {
        if let transfer { owners[socket] = transfer }
        busy.insert(socket)
        idle.remove(socket)
    }

    /// libcurl wants no more events on `socket`.
    public mutating func unwanted(_ socket: Socket) {
        busy.remove(socket)
    }

    /// `transfer` finished on `socket`: whether the socket is now idle in the pool (the fetcher
    /// checks it for stray bytes, then calls `becameIdle` or `dead`).
    public mutating func finished(_ socket: Socket, by transfer: Transfer, http2: Bool) -> Bool {
        if let owner = owners[socket], owner != transfer { return false }  // another transfer has it now
        owners[socket] = nil
        return !busy.contains(socket) && !http2
    }

    public mutating func becameIdle(_ socket: Socket) {
        idle.insert(socket)
    }

    /// `transfer` took the connection on `socket` (a new one, or one from the pool). When it was
    /// idle, the fetcher stops watching it (after checking it for stray bytes) and calls `leftIdle`.
    public mutating func taken(_ socket: Socket, by transfer: Transfer) {
        owners[socket] = transfer
    }

    public func isIdle(_ socket: Socket) -> Bool { idle.contains(socket) }

    public mutating func leftIdle(_ socket: Socket) {
        idle.remove(socket)
    }

    /// The connection on `socket` was made dead (stray bytes): it is idle no more.
    public mutating func dead(_ socket: Socket) {
        idle.remove(socket)
    }

    /// Every socket the table knows, for finding the one a transfer took.
    public var known: Set<Socket> { idle.union(busy).union(owners.keys) }

    /// `transfer` ended: no socket names it (its identity may be a new transfer's soon).
    public mutating func released(_ transfer: Transfer) {
        for (socket, owner) in owners where owner == transfer { owners[socket] = nil }
    }

    /// libcurl closes `socket`.
    public mutating func closed(_ socket: Socket) {
        owners[socket] = nil
        idle.remove(socket)
        busy.remove(socket)
    }
}
