// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// What the Swift blocks of the README and docs/ leave to the app: its views, its data, its image type. Only declared:
// the snippets are compiled (Snippets.swift, Swift 6 language mode), never run.
import FoundationEssentials
import FoundationNetworking
import NetActivityClient

private func app() -> Never { fatalError("the docs' snippets are compiled, not run") }

// An image type as a toolkit has one: not Sendable.
final class Pixbuf {
    init?(bytes: [UInt8]) {}
}

// A texture made from pixels as they are (GTK 4's GdkMemoryTexture): not Sendable either.
final class Texture {
    init(pixels: DecodedImage) {}
}

@MainActor final class ImageView { var image: Pixbuf? }
@MainActor final class Picture { var texture: Texture? }
@MainActor final class ProgressBar { var fraction = 0.0 }
@MainActor final class Spinner { var spinning = false }
@MainActor final class PullToRefresh { var refreshing = false }
struct User { let avatarURL: String }

@MainActor var activity: NetActivity { app() }
@MainActor var upload: NetActivityTask { app() }
@MainActor var download: NetActivityTask { app() }
@MainActor var path: String { app() }
@MainActor let view = Spinner()
@MainActor let pull = PullToRefresh()
@MainActor let progressBar = ProgressBar()
@MainActor let imageView = ImageView()
@MainActor let picture = Picture()
@MainActor var silhouette: Pixbuf? { app() }
let user = User(avatarURL: "https://example.com/avatar.png")
let photo: [UInt8] = []
let url = "https://example.com/feed.json"
let someURL = URL(string: "https://example.com/")!
var request: URLRequest { URLRequest(url: someURL) }

func downloadFeed() async throws -> [UInt8] { app() }
func uploadProgress(_ data: [UInt8]) -> AsyncThrowingStream<UInt64, any Error> { app() }
