// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc

/// A failed system call or child process: what was being done, and errno when there is one.
public struct SystemError: Error, Equatable, Sendable, CustomStringConvertible {
    public let operation: String
    public let errno: Int32?

    public init(_ operation: String, errno: Int32? = nil) {
        self.operation = operation
        self.errno = errno
    }

    public var message: String {
        guard let errno else { return operation }
        return "\(operation): \(String(cString: strerror(errno)))"
    }

    public var description: String { message }
}
