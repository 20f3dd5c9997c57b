// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract

/// A service that serves one interface of the contract. Its table is the interface's members as
/// the XML declares them (names, arguments, types, access: `NetActivityContract/Names.swift`),
/// each bound by an exhaustive switch to a named handler of the service (the way sd-bus hands a
/// vtable's handlers their userdata). A member added to or taken from the XML is a
/// switch that no longer compiles; an argument cannot be told twice.
protocol BusService: AnyObject {
    associatedtype Member: ContractInterface
    /// What the setters check first (the host's to set, the administrator's to lock).
    var context: AgentContext { get }
    /// Hands a call of `method` to its handler, a method of the service that reads the call's
    /// arguments, does the work and writes the reply.
    func handle(_ method: Member.Method, _ call: inout MethodCall) throws
    /// Every property's reader, and its writer where the XML says readwrite.
    static func property(_ property: Member.Property) -> BusProperty<Self>
}

/// How a property of a service is read (the value written without its variant, for the object at
/// the path) and, if it can be, set (its new value read from inside the variant).
struct BusProperty<Service> {
    let get: (Service, inout MessageWriter, String) throws -> Void
    let set: ((Service, inout MessageReader) throws -> Void)?

    /// A property that can only be read.
    static func read(_ get: @escaping (Service, inout MessageWriter) throws -> Void) -> Self {
        Self(get: { service, w, _ in try get(service, &w) }, set: nil)
    }

    /// A property read per object (a task's, at its path).
    static func read(atPath get: @escaping (Service, inout MessageWriter, String) throws -> Void) -> Self {
        Self(get: get, set: nil)
    }

    /// A property that can be set as well.
    static func readwrite(
        _ get: @escaping (Service, inout MessageWriter) throws -> Void,
        set: @escaping (Service, inout MessageReader) throws -> Void
    ) -> Self {
        Self(get: { service, w, _ in try get(service, &w) }, set: set)
    }

    /// `Version`: every interface's, the contract's version.
    static var version: Self { .read { _, w in w.append(NetActivityBus.version) } }
}

extension BusService {
    /// The interface the object server serves for this service.
    ///
    /// Handlers reach the service without counting a reference (`bound`'s costs a runtime call
    /// per use, on the calls apps make most): the agent owns every service and the object server
    /// holding these closures, and lets them go together.
    func makeInterface() -> DBusInterface {
        DBusInterface(
            Member.interface.rawValue,
            methods: Member.Method.allCases.map { method in
                DBusMethod(
                    method.rawValue, in: method.inArguments.map(DBusArgument.init),
                    out: method.outArguments.map(DBusArgument.init)
                ) { [unowned(unsafe) self] call in try self.handle(method, &call) }
            },
            properties: Member.Property.allCases.map(makeProperty),
            signals: Member.signals.map { DBusSignal($0.rawValue, $0.arguments.map(DBusArgument.init)) })
    }

    /// Every writable property of the contract affects every app: the host's to set, the
    /// administrator's to lock.
    private func makeProperty(_ property: Member.Property) -> DBusProperty {
        let row = Self.property(property)
        precondition(
            (row.set != nil) == property.isWritable,
            "\(Member.interface.rawValue).\(property.rawValue): the table and the XML disagree on whether it can be set"
        )
        let name = property.rawValue
        return DBusProperty(
            name, property.signature, emitsChanged: DBusProperty.EmitsChanged(property.emitsChanged),
            get: { [unowned(unsafe) self] w, path in try row.get(self, &w, path) },
            set: row.set.map { set in
                { [unowned(unsafe) self] r, _, sender in
                    try self.context.requireHost(sender, toSet: name)
                    try set(self, &r)
                }
            })
    }
}

extension DBusArgument {
    init(_ argument: ContractArgument) { self.init(argument.name, argument.signature) }
}

extension DBusProperty.EmitsChanged {
    init(_ value: ContractEmitsChanged) {
        switch value {
        case .true: self = .true
        case .invalidates: self = .invalidates
        case .const: self = .const
        case .false: self = .false
        }
    }
}
