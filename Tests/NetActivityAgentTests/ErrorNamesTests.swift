// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract
import Testing

/// One table of error names: DBusKit names the standard errors from libdbus's own `DBUS_ERROR_*`
/// table, the contract's `NetActivityError.Name` is generated from dbus/*.xml, and where both
/// name the same error they must agree, or an agent error and the library's reading of it would
/// part ways.
@Suite("Error names")
struct ErrorNamesTests {
    typealias Name = NetActivityError.Name

    @Test("DBusKit's standard errors and the contract's standard names agree")
    func standardNamesAgree() {
        let pairs: [(DBusError, Name)] = [
            (.invalidArgs(""), .invalidArgs), (.accessDenied(""), .accessDenied), (.failed(""), .failed),
            (.unknownMethod(""), .unknownMethod), (.unknownObject(""), .unknownObject),
            (.unknownInterface(""), .unknownInterface), (.unknownProperty(""), .unknownProperty),
            (.propertyReadOnly(""), .propertyReadOnly), (.limitsExceeded(""), .busLimitsExceeded),
            (.noReply(""), .noReply), (.disconnected(""), .disconnected),
        ]
        for (kit, contract) in pairs {
            #expect(kit.name == contract.rawValue)
            #expect(DBusNames.isValidErrorName(kit.name))
        }
    }

    @Test("every contract name is a valid D-Bus error name, own names under the agent's prefix")
    func contractNamesAreWellFormed() {
        for name in Name.allCases {
            #expect(DBusNames.isValidErrorName(name.rawValue), "\(name.rawValue)")
            #expect(name.rawValue.hasPrefix(Name.agentPrefix) || name.rawValue.hasPrefix("org.freedesktop.DBus.Error."))
        }
        #expect(Set(Name.allCases.map(\.rawValue)).count == Name.allCases.count)
        #expect(NetActivityError(.clientVanished, "").code == .clientVanished)
        #expect(NetActivityError(.busTimeout, "").code == .disconnected)
    }
}
