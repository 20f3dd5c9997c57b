// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import FoundationEssentials

// `URL` beside `String` for the image APIs: the same calls, with `url.absoluteString` as the key
// (the agent accepts http and https URLs and names any other in an `InvalidURL` error).

extension ImageSlot {
    /// `setImage(url:)` for a `URL`; nil cancels and shows the placeholder.
    public func setImage(
        url: URL?, additionalIdentifier: String = "", placeholder: Image? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) {
        setImage(
            url: url?.absoluteString ?? "", additionalIdentifier: additionalIdentifier, placeholder: placeholder,
            success: success, failure: failure)
    }
}

extension ExecutorImageSlot {
    /// `setImage(url:)` for a `URL`; nil cancels and shows the placeholder.
    public func setImage(
        url: URL?, additionalIdentifier: String = "", placeholder: Image? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) {
        setImage(
            url: url?.absoluteString ?? "", additionalIdentifier: additionalIdentifier, placeholder: placeholder,
            success: success, failure: failure)
    }
}

extension NetActivity {
    public func downloadImage(
        url: URL, additionalIdentifier: String = "", reload: Bool = false, priority: ImagePriority = .normal,
        cacheKey: String? = nil, maxAge: Duration? = nil
    ) async throws(NetActivityError) -> [UInt8] {
        try await downloadImage(
            url: url.absoluteString, additionalIdentifier: additionalIdentifier, reload: reload, priority: priority,
            cacheKey: cacheKey,
            maxAge: maxAge)
    }

    public func image(url: URL, additionalIdentifier: String = "") async throws(NetActivityError) -> [UInt8]? {
        try await image(url: url.absoluteString, additionalIdentifier: additionalIdentifier)
    }

    public func openImage(url: URL, additionalIdentifier: String = "", reload: Bool = false)
        async throws(NetActivityError)
        -> SharedImageFile
    {
        try await openImage(url: url.absoluteString, additionalIdentifier: additionalIdentifier, reload: reload)
    }

    public func fetchImage(
        url: URL, additionalIdentifier: String = "", reload: Bool = false, priority: ImagePriority = .normal,
        cacheKey: String? = nil, maxAge: Duration? = nil
    ) async throws(NetActivityError) -> FetchedImage {
        try await fetchImage(
            url: url.absoluteString, additionalIdentifier: additionalIdentifier, reload: reload, priority: priority,
            cacheKey: cacheKey,
            maxAge: maxAge)
    }

    public func addImage(_ data: [UInt8], url: URL, additionalIdentifier: String = "") async throws(NetActivityError) {
        try await addImage(data, url: url.absoluteString, additionalIdentifier: additionalIdentifier)
    }
}
