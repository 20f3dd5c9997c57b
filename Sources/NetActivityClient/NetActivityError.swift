// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
// The contract (names, limits, NetActivityError) is part of the library's API: `import
// NetActivityClient` is all an app writes.
@_exported public import NetActivityContract

extension NetActivityError {
    init(_ e: DBusError) {
        self.init(name: e.name, message: e.message)
    }

    static func invalidArguments(_ message: String) -> NetActivityError { .invalidArgs(message) }
}
