// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import NetActivityContract

/// One part of the client's state that the agent mirrors. Each is told, in `ClientCore`'s order,
/// of every new bus connection and of the agent's comings and goings; all of it runs on the
/// client's thread.
protocol AgentParticipant: AnyObject {
    /// A new bus connection: the participant's signal handlers and match rules.
    func connected(_ connection: Connection)
    /// The connection's Hello was answered: `name` is the app's unique name from now on.
    func registered(as name: String)
    /// The agent left, or was replaced: whatever it held for this client is gone with it.
    func agentLeft()
    /// An agent appeared: everything the participant holds is asserted to it afresh.
    func agentAppeared()
    /// The app closed the client: every follower hears the end, every resource goes.
    func shutDown()
}

extension AgentParticipant {
    func connected(_ connection: Connection) {}
    func registered(as name: String) {}
    func agentLeft() {}
    func agentAppeared() {}
    func shutDown() {}
}

/// The app's activity count and leases: the truth is kept here and mirrored to the agent.
///
/// Counting and leases answer at once, from the local truth; the agent hears of them without
/// anyone waiting. If it refuses one (a per-app limit), the holding is dropped here too: tracking
/// is advisory, and the app's own work never depends on it.
final class Holdings: AgentParticipant {
    private unowned let core: ClientCore
    private var count = 0
    private var leases: [Int: LeaseRecord] = [:]

    struct LeaseRecord {
        let reason: String
        /// The agent's end of the lease while it holds it (-1: not held there).
        var fd: Int32 = -1
    }

    init(core: ClientCore) { self.core = core }

    /// Whether the agent should be counting anything of ours.
    var holdsActivity: Bool { count > 0 || !leases.isEmpty }

    // MARK: counts

    func increment() {
        count += 1
        let generation = core.generation
        core.send(
            ActivityMember.Method.incrementActivityCount.rawValue,
            reply: { [unowned self] result in
                if case .failure(let e) = result, !ClientCore.isAbsence(e), self.count > 0 {
                    // Refused (a limit): undo, and take it back from an agent that was told on re-assertion.
                    self.count -= 1
                    if generation != self.core.generation {
                        self.core.send(ActivityMember.Method.decrementActivityCount.rawValue)
                    }
                }
            })
    }

    func decrement() {
        guard count > 0 else { return }
        count -= 1
        core.send(ActivityMember.Method.decrementActivityCount.rawValue)
    }

    // MARK: leases

    func beginLease(reason: String) -> Int {
        let id = core.makeID()
        leases[id] = LeaseRecord(reason: reason)
        assertLease(id) { [unowned self] result in
            if case .failure = result { self.endLease(id) }
        }
        return id
    }

    private func assertLease(_ id: Int, _ done: @escaping ClientCore.Completion<Void>) {
        guard let reason = leases[id]?.reason else { return done(.success(())) }
        let generation = core.generation
        core.send(
            ActivityMember.Method.beginActivity.rawValue, { w in w.append(reason) },
            reply: { [unowned self] result in
                guard case .success(let reply) = result else { return ClientCore.settle(result, done) }
                var r = reply.reader()
                guard let fd = try? r.readFD() else { return done(.success(())) }
                // The lease may have ended, or the agent changed, while the call was out.
                if generation == self.core.generation, self.leases[id] != nil {
                    self.leases[id]!.fd = fd
                } else {
                    close(fd)
                }
                done(.success(()))
            })
    }

    /// Ends lease `id` (a second end finds nothing: the fd closes once, on this thread).
    func endLease(_ id: Int) {
        guard let lease = leases.removeValue(forKey: id) else { return }
        if lease.fd >= 0 { close(lease.fd) }
    }

    // MARK: the agent

    /// The old agent's lease pipes are dead; new ones come with the re-assertion.
    func agentLeft() {
        for (id, lease) in leases where lease.fd >= 0 {
            close(lease.fd)
            leases[id]?.fd = -1
        }
    }

    func agentAppeared() {
        for _ in 0..<count { core.send(ActivityMember.Method.incrementActivityCount.rawValue) }
        for id in leases.keys.sorted() { assertLease(id) { _ in } }
    }

    func shutDown() {
        for lease in leases.values where lease.fd >= 0 { close(lease.fd) }
        leases = [:]
        count = 0
    }
}
