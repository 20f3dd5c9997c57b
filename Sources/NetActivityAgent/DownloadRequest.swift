// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract
import NetActivityCore

/// What a download request asks for (DownloadImage, FetchImage, FetchPixels), from its URL and
/// options, checked as every download method checks them: the URL, the options' names and types,
/// the cache key (the URL's, or the caller's app's own `cache-key`), reload, priority and max-age.
/// Any problem is InvalidArgs (or InvalidURL) naming the value.
struct DownloadRequest: Equatable {
    let key: String
    let reload: Bool
    let priority: ImageDownloader.Priority
    /// Seconds a cached copy may be old for this request (the `max-age` option).
    let maxAge: Double?

    /// `scope`: the caller's app's namespace for `cache-key` (`ClientIdentity.scope`).
    init<Option: MethodOption>(
        url: String, options: [String: DBusValue], scope: Substring, method: DownloaderMember.Method, _: Option.Type
    ) throws(NetActivityError) {
        typealias Common = DownloaderMember.DownloadImageOption
        try DownloadURL.check(url)
        try checkOptions(options, of: method.rawValue, Option.self)
        priority = try Self.priority(options[Common.priority.rawValue]?.stringValue)
        let additional = options[Common.additionalIdentifier.rawValue]?.stringValue ?? ""
        guard additional.utf8.count <= NetActivityLimits.maxImageKeyBytes else {
            throw .invalidArgs(
                "additional-identifier is \(additional.utf8.count) bytes long; the limit is \(NetActivityLimits.maxImageKeyBytes)"
            )
        }
        if let cacheKey = options[Common.cacheKey.rawValue]?.stringValue {
            guard !cacheKey.isEmpty, cacheKey.utf8.count <= NetActivityLimits.maxImageKeyBytes else {
                throw .invalidArgs(
                    "cache-key must be 1 to \(NetActivityLimits.maxImageKeyBytes) bytes long, got \(cacheKey.utf8.count)"
                )
            }
            key = ImageRequestKey.scoped(app: scope, cacheKey: cacheKey, additional: additional)
        } else {
            key = ImageRequestKey.make(url: url, additional: additional)
        }
        maxAge = options[Common.maxAge.rawValue]?.doubleValue
        if let maxAge, !(0...Double(NetActivityLimits.maxRequestMaxAge)).contains(maxAge) {
            throw .invalidArgs("max-age must be 0 to \(NetActivityLimits.maxRequestMaxAge) seconds, got \(maxAge)")
        }
        reload = options[Common.reload.rawValue]?.boolValue ?? false
    }

    /// A priority named on the bus, or InvalidArgs naming the values.
    static func priority(_ value: String?) throws(NetActivityError) -> ImageDownloader.Priority {
        guard let value else { return .normal }
        guard let priority = ImageDownloader.Priority(rawValue: value) else {
            let known = ImageDownloader.Priority.allCases.map(\.rawValue).joined(separator: ", ")
            throw .invalidArgs("A priority must be one of \(known), got '\(value.prefix(100))'")
        }
        return priority
    }
}
