// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract

/// The agent's properties as it last published them (read whole when an agent appears, then
/// kept up to date by its PropertiesChanged), and the app's followers of them.
final class StatusMirror: AgentParticipant {
    private unowned let core: ClientCore
    private var status: ActivityStatus?
    private var observers: [Int: Observer<ActivityStatus?>] = [:]

    init(core: ClientCore) { self.core = core }

    static let interface = ClientCore.interface

    /// The agent's properties by GetAll. `fallingBack`: answered `deadline` (200 ms) after the
    /// call at the latest, whatever the bus and the agent do: if neither the lookup of the agent
    /// nor its GetAll has answered by then, the last properties it published are the answer, or
    /// with none yet a `noReply` error (a hung agent, or a stalled bus, does not hold the app up).
    func current(
        fallingBack: Bool = false, destination: String? = nil, _ done: @escaping ClientCore.Completion<ActivityStatus>
    ) {
        let answer =
            !fallingBack
            ? done
            : core.answerOnce(
                within: Self.deadline,
                otherwise: { [unowned self] in
                    let who = self.core.isLookingUp ? "The bus" : "The agent"
                    return self.status.map { .success($0) }
                        ?? .failure(NetActivityError(.noReply, "\(who) did not answer within 200 ms"))
                }, done)
        core.query(
            "GetAll", interface: "org.freedesktop.DBus.Properties", destination: destination,
            { w in w.append(Self.interface) },
            reply: { [unowned self] result in
                if case .failure(let e) = result, e.code == .disconnected, fallingBack, let mirror = self.status {
                    return answer(.success(mirror))
                }
                answer(
                    result.flatMap { reply in
                        var r = reply.reader()
                        var s = ActivityStatus()
                        do throws(DBusError) { s.apply(try r.readVardict()) } catch {
                            return .failure(NetActivityError(error))
                        }
                        return .success(s)
                    })
            })
    }

    static let deadline: UInt64 = 200_000_000

    private func refresh() {
        let generation = core.generation
        current { [unowned self] result in
            guard generation == self.core.generation, case .success(let s) = result else { return }
            self.status = s
            self.publish()
        }
    }

    /// Reads one property that a PropertiesChanged named as invalidated, and applies it.
    private func refreshProperty(_ name: String) {
        guard status != nil else { return }  // the GetAll on its way carries it
        let generation = core.generation
        core.send(
            "Get", interface: "org.freedesktop.DBus.Properties",
            { w in
                w.append(Self.interface)
                w.append(name)
            },
            reply: { [unowned self] result in
                guard generation == self.core.generation, case .success(let reply) = result else { return }
                var r = reply.reader()
                guard let value = try? r.readValue() else { return }
                self.changed([name: value.unwrapped])
            })
    }

    private func changed(_ props: [String: DBusValue]) {
        guard var s = status else { return }
        s.apply(props)
        guard s != status else { return }
        status = s
        publish()
    }

    private func publish() {
        for o in observers.values { o.yield(status) }
    }

    /// The status now (once known; nil while there is no agent), then on every change.
    @discardableResult
    func observe(_ observer: Observer<ActivityStatus?>) -> Int {
        let key = core.makeID()
        guard !core.isClosed else {
            observer.finish()
            return key
        }
        observers[key] = observer
        if status != nil || (core.owner == nil && !core.isLookingUp) {
            observer.yield(status)
        } else if core.isLookingUp {
            // Not known yet: an agent's status comes with its arrival; its absence, here.
            core.whenOwnerKnown { [unowned self] in
                if self.core.owner == nil, self.observers[key] != nil { observer.yield(nil) }
            }
        }
        return key
    }

    func unobserve(_ key: Int) { observers[key] = nil }

    func observe(_ continuation: AsyncStream<ActivityStatus?>.Continuation) {
        let key = observe(Observer(continuation))
        continuation.onTermination = { [weak core, mailbox = core.mailbox] _ in
            mailbox.post { [weak core] in core?.statusMirror.unobserve(key) }
        }
    }

    // MARK: the bus and the agent

    func connected(_ c: Connection) {
        // The agent's own signals come from its unique name; the bus resolves the well-known one.
        let changed = SignalMatch(
            path: ClientCore.path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
        c.addMatchWithoutWaiting(changed.rule + ",sender='\(ClientCore.busName)',arg0='\(Self.interface)'")
        c.onSignal(changed) { [unowned self] message in
            guard message.sender == self.core.owner else { return }
            var r = message.reader()
            guard (try? r.read(String.self)) == Self.interface, let props = try? r.readVardict() else { return }
            self.changed(props)
            // Reasons is announced without its value (each reader may see different rows).
            let invalidated = (try? r.readValue())?.arrayElements?.compactMap(\.stringValue) ?? []
            for name in invalidated where ActivityMember.Property(rawValue: name) != nil { self.refreshProperty(name) }
        }
    }

    func agentLeft() {
        status = nil
        publish()
    }

    func agentAppeared() { refresh() }

    func shutDown() {
        for o in observers.values { o.finish() }
        observers = [:]
    }
}
