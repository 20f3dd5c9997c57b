// swift-tools-version: 6.0
// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// An app that adopts netactivity, as an app author would: the package by path (an app elsewhere
// names it by URL and version), and one product. `make test` builds it.
import PackageDescription

let package = Package(
    name: "netactivity-example",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(name: "netactivity", path: "../.."),  // netactivity: line 1 of 2
    ],
    targets: [
        .executableTarget(
            name: "netactivity-example",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NetActivityAsyncHTTPClient", package: "netactivity"),  // netactivity: line 2 of 2
            ]
        ),
        // A GTK-style main thread: a GLib main loop running the library's main-actor faces.
        .executableTarget(
            name: "glib-main-actor",
            dependencies: [.product(name: "NetActivityClient", package: "netactivity")]
        ),
        // The Swift blocks of README.md and docs/, compiled in Swift 6 mode (scripts/readme-snippets.py writes them).
        .target(
            name: "ReadmeSnippets",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NetActivityAsyncHTTPClient", package: "netactivity"),
                .product(name: "NetActivityURLSession", package: "netactivity"),
            ]
        ),
    ]
)
