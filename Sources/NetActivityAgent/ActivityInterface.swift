import DBusKit
import NetActivityCore

extension Agent {
    /// The `org.example.NetActivity` table (documented in dbus/org.example.NetActivity.xml).
    func makeActivityInterface() -> DBusInterface {
        DBusInterface(
            NetActivityNames.interface,
            methods: [
                DBusMethod("IncrementActivityCount") { [unowned self] call in
                    try self.add(.count, for: call.sender)
                },
                DBusMethod("DecrementActivityCount") { [unowned self] call in
                    // Only the caller's own count; at zero this is a no-op, never an error.
                    if self.ledger.remove(.count, for: call.sender) { self.totalChanged() }
                },
                DBusMethod("BeginActivity", in: [DBusArgument("reason", "s")], out: [DBusArgument("lease", "h")]) {
                    [unowned self] call in
                    let reason = try call.args.read(String.self)
                    try self.beginLease(for: call.sender, reason: reason, reply: &call.reply)
                },
                DBusMethod(
                    "BeginTask", in: [DBusArgument("description", "s"), DBusArgument("options", "a{sv}")],
                    out: [DBusArgument("task", "o")]
                ) { [unowned self] call in
                    let description = try call.args.read(String.self)
                    let options = try call.args.readVardict()
                    let path = try self.beginTask(for: call.sender, description: description, options: options)
                    try call.reply.appendObjectPath(path)
                },
            ],
            properties: [
                DBusProperty("Version", "u", emitsChanged: .const) { w, _ in w.append(NetActivityNames.version) },
                DBusProperty("Enabled", "b", get: { [unowned self] w, _ in w.append(self.machine.isEnabled) }) {
                    [unowned self] r, _, _ in
                    let enabled = try r.read(Bool.self)
                    guard enabled != self.machine.isEnabled else { return }
                    let actions = self.machine.setEnabled(enabled, now: self.now)
                    self.emitChanged(["Enabled"])
                    self.perform(actions)
                },
                DBusProperty("Visible", "b") { [unowned self] w, _ in w.append(self.machine.isVisible) },
                DBusProperty("State", "s") { [unowned self] w, _ in w.append(self.machine.state.rawValue) },
                DBusProperty("ActivityCount", "u") { [unowned self] w, _ in
                    w.append(UInt32(clamping: self.ledger.total))
                },
                delayProperty("ActivationDelay", \.activationDelay),
                delayProperty("CompletionDelay", \.completionDelay),
                DBusProperty("Clients", "a(ssu)") { [unowned self] w, _ in
                    w.appendArray(elementSignature: "(ssu)") { a in
                        for c in self.ledger.activeClients {
                            a.appendStruct { s in
                                s.append(c.name)
                                s.append(c.processName)
                                s.append(c.count)
                            }
                        }
                    }
                },
            ],
            signals: [DBusSignal("Visible", [DBusArgument("visible", "b")])]
        )
    }

    private func delayProperty(
        _ name: String, _ keyPath: WritableKeyPath<ActivityIndicatorStateMachine, Duration>
    ) -> DBusProperty {
        DBusProperty(name, "d", get: { [unowned self] w, _ in w.append(self.machine[keyPath: keyPath].seconds) }) {
            [unowned self] r, _, _ in
            let seconds = try r.read(Double.self)
            guard seconds.isFinite, seconds >= 0, seconds <= AgentLimits.maxDelaySeconds else {
                throw DBusError.invalidArgs(
                    "\(name) must be between 0 and \(Int(AgentLimits.maxDelaySeconds)) seconds, got \(seconds)")
            }
            let value = Duration.seconds(double: seconds)
            guard value != self.machine[keyPath: keyPath] else { return }
            self.machine[keyPath: keyPath] = value
            self.emitChanged([name])
        }
    }
}
