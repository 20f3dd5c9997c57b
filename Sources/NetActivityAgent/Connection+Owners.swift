// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit

extension Connection {
    /// Follows a bus name's owner: `onOwner` gets the owner now (looked up without blocking) and
    /// after every change ("" when it left).
    /// Returns how to stop following.
    @discardableResult
    func followOwner(of name: String, _ onOwner: @escaping (String) -> Void) -> () -> Void {
        let rule = SignalMatch.nameOwnerChanged.rule + ",arg0='\(name)'"
        // Never blocks the loop (a reload turns observers on and off while serving).
        addMatchWithoutWaiting(rule)
        var following = true
        let id = onSignal(SignalMatch.nameOwnerChanged) { message in
            guard let change = SignalMatch.nameOwnerChange(message), change.name == name else { return }
            onOwner(change.newOwner)
        }
        busCallAsync("GetNameOwner", timeoutMilliseconds: 5000, { w in w.append(name) }) { result in
            guard following, case .success(let reply) = result else { return }
            var r = reply.reader()
            if let owner = try? r.read(String.self) { onOwner(owner) }
        }
        // Strong: a weak reference would give the connection a side table, and every retain of
        // it (each call) the runtime's slow path. The connection outlives its followers anyway.
        return { [self] in
            following = false
            self.removeSignalHandler(id)
            self.removeMatch(rule)
        }
    }
}
