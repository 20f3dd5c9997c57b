// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract

/// Plain requests (the image cache, the CLI): one call, its reply decoded, the agent's absence an
/// error; and the checks on an app's own input that hold with or without an agent.
extension ClientCore {
    /// The app's own input, checked here so that it fails the same with or without an agent.
    static func checkText(_ text: String, _ what: String, limit: Int) throws(NetActivityError) {
        let bytes = text.utf8.count
        if bytes > limit { throw .invalidArgs("The \(what) is \(bytes) bytes; at most \(limit) are allowed") }
    }

    /// One call whose reply is decoded by `decode`; the agent's absence is an error here.
    func request<T>(
        _ member: String, path: String = ClientCore.path, interface: String, destination: String? = nil,
        _ body: @escaping (inout MessageWriter) throws -> Void = { _ in },
        decode: @escaping (inout MessageReader) throws(DBusError) -> T, _ done: @escaping Completion<T>
    ) {
        query(
            member, path: path, interface: interface, destination: destination, body,
            reply: { result in
                done(
                    result.flatMap { reply in
                        var r = reply.reader()
                        do throws(DBusError) { return .success(try decode(&r)) } catch {
                            return .failure(NetActivityError(error))
                        }
                    })
            })
    }
}
