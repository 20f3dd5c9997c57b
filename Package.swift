// swift-tools-version: 6.0
// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "netactivity",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "netactivityd", targets: ["netactivityd"]),
        .executable(name: "netactivity", targets: ["netactivity"]),
        .library(name: "NetActivityClient", targets: ["NetActivityClient"]),
        // Tracking for async-http-client: every request a task at the agent. A product of its own so
        // that apps (and the agent) that do not use async-http-client never build SwiftNIO.
        .library(name: "NetActivityAsyncHTTPClient", targets: ["NetActivityAsyncHTTPClient"]),
        // Tracking for FoundationNetworking's URLSession.
        .library(name: "NetActivityURLSession", targets: ["NetActivityURLSession"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // Deque: the one first-in-first-out queue (SwiftNIO builds it anyway).
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
    ],
    targets: [
        // The only place that sees <dbus/dbus.h>.
        .systemLibrary(
            name: "CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        // libcurl for the downloader, driven by the agent's own event loop (no threads), loaded
        // at the first download (dlopen): curl.h at build time (libcurl4-openssl-dev), no link.
        .target(name: "CCurl", linkerSettings: [.linkedLibrary("dl")]),
        // The contract: names, limits and the one error type. Depends on nothing.
        .target(name: "NetActivityContract", swiftSettings: strict),
        // The Linux calls Swift's Glibc module does not import (eventfd, signalfd, memfd, seals).
        .systemLibrary(name: "CLinux"),
        // The platform: epoll loop and mailbox, timers (Scheduler), sealed memory, pipes, processes.
        .target(
            name: "LinuxKit", dependencies: ["CLinux", .product(name: "DequeModule", package: "swift-collections")],
            swiftSettings: strict),
        // Small Swift wrapper over libdbus: names, messages, reader/writer, connection, object export.
        .target(
            name: "DBusKit",
            dependencies: ["CDBus", "LinuxKit", .product(name: "DequeModule", package: "swift-collections")],
            swiftSettings: strict),
        // Pure logic: state machine, ledger, coalescing, caches, download queue. Imports only the contract.
        .target(
            name: "NetActivityCore",
            dependencies: ["NetActivityContract", .product(name: "DequeModule", package: "swift-collections")],
            swiftSettings: strict),
        // The agent as services over the contract, bound to the bus.
        .target(
            name: "NetActivityAgent",
            dependencies: [
                "NetActivityContract", "LinuxKit", "DBusKit", "NetActivityCore", "CCurl", "CDecoder",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "netactivityd",
            dependencies: [
                "NetActivityAgent", "NetActivityContract", "LinuxKit", "DBusKit",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Swift API for apps and for the CLI.
        .target(
            name: "NetActivityClient", dependencies: ["NetActivityContract", "LinuxKit", "DBusKit"],
            swiftSettings: strict),
        .target(
            name: "NetActivityAsyncHTTPClient",
            dependencies: [
                "NetActivityClient",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .target(name: "NetActivityURLSession", dependencies: ["NetActivityClient"], swiftSettings: strict),
        .executableTarget(
            name: "netactivity",
            dependencies: [
                "NetActivityClient", "NetActivityContract", "LinuxKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        // The wire between the agent and its image decoder (netactivity-decoder, a C program of its own
        // that the Makefile builds with the system's compiler: see there).
        .target(name: "CDecoder"),
        // A load client for `make bench` (not a product; not installed).
        .executableTarget(
            name: "netactivity-bench",
            dependencies: ["NetActivityContract", "LinuxKit", "DBusKit", "NetActivityCore", "NetActivityTesting"],
            swiftSettings: strict),
        // Test kit: ManualClock, ManualScheduler, FakeFetcher, test images.
        .target(
            name: "NetActivityTesting", dependencies: ["NetActivityContract", "NetActivityCore", "LinuxKit"],
            swiftSettings: strict),
        .testTarget(
            name: "NetActivityCoreTests",
            dependencies: ["NetActivityContract", "NetActivityCore", "NetActivityTesting"],
            swiftSettings: strict
        ),
        .testTarget(name: "LinuxKitTests", dependencies: ["LinuxKit"], swiftSettings: strict),
        .testTarget(
            name: "DBusKitTests", dependencies: ["DBusKit", "LinuxKit", "NetActivityTesting"], swiftSettings: strict),
        // The agent's services driven with a manual scheduler and a recording sink: no bus, no sleep.
        .testTarget(
            name: "NetActivityAgentTests",
            dependencies: [
                "NetActivityAgent", "NetActivityContract", "NetActivityCore", "DBusKit", "LinuxKit",
                "NetActivityTesting",
            ],
            swiftSettings: strict),
        // The library against the real agent (built beside the tests) on a private bus.
        .testTarget(
            name: "NetActivityClientTests",
            dependencies: [
                "NetActivityClient", "NetActivityAsyncHTTPClient", "NetActivityURLSession", "NetActivityContract",
                "DBusKit",
                "LinuxKit", "NetActivityTesting",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: strict),
    ]
)
