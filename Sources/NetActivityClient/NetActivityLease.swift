// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import NetActivityContract

/// A held activity lease from `NetActivity.beginActivity`. It ends with `end()`, when released,
/// or when its connection closes; it survives agent restarts.
public final class NetActivityLease: Sendable {
    let core: ClientCore
    let id: Int

    init(core: ClientCore, id: Int) {
        self.core = core
        self.id = id
    }

    /// Ends the lease, from any thread; ending twice does nothing. The agent's end of the lease
    /// (its fd) is owned by the client's thread, which closes it once: two `end()`s at once can
    /// never close a descriptor number that someone else has reused meanwhile.
    public func end() {
        core.mailbox.post { [core, id] in core.holdings.endLease(id) }
    }

    deinit { end() }
}
