// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import ArgumentParser
import Glibc
import LinuxKit
import NetActivityClient
import NetActivityContract

struct Cache: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("Use the shared image cache: add, get, rm, clear, stats."),
        discussion: tr(
            "Exit status: 1 when the image is missing or refused, 66 when FILE cannot be read, 73 when -o cannot be written."
        ),
        subcommands: [Add.self, Get.self, Remove.self, Clear.self, Stats.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: tr("Store the image in FILE under ID."))
        @OptionGroup var bus: BusOptions
        @Argument(help: ArgumentHelp(tr("The identifier (often the image's URL)."))) var id: String
        @Argument(help: ArgumentHelp(tr("An image file: PNG, JPEG, GIF, WebP, BMP, ICO or SVG."))) var file: String

        func run() throws {
            guard let data = readFile(file) else {
                fail(tr("cannot read {1}: {2}", file, String(cString: strerror(errno))), code: 66)
            }
            let client = try bus.connect()
            do { try client.addImage(data, identifier: id) } catch { fail(error) }
        }
    }

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: tr("Write the image stored under ID to stdout or a file (through the zero-copy fd)."))
        @OptionGroup var bus: BusOptions
        @Argument var id: String
        @Option(name: .short, help: ArgumentHelp(tr("Write to this file instead of stdout."))) var output: String?

        func run() throws {
            let client = try bus.connect()
            let opened: (fd: Int32, size: UInt64)?
            do { opened = try client.openImage(identifier: id) } catch { fail(error) }
            guard let (fd, _) = opened else { fail(tr("no image '{1}' in the cache", id), code: 1) }
            defer { close(fd) }
            var out: Int32 = 1
            if let output {
                out = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                guard out >= 0 else {
                    fail(tr("cannot write {1}: {2}", output, String(cString: strerror(errno))), code: 73)
                }
            }
            defer { if out != 1 { close(out) } }
            guard copyAll(from: fd, to: out) else {
                fail(tr("writing the image failed: {1}", String(cString: strerror(errno))), code: 74)
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: tr("Remove the image stored under ID (exit 1 if none)."))
        @OptionGroup var bus: BusOptions
        @Argument var id: String

        func run() throws {
            let client = try bus.connect()
            let removed: Bool
            do { removed = try client.removeImage(identifier: id) } catch { fail(error) }
            if !removed { fail(tr("no image '{1}' in the cache", id), code: 1) }
        }
    }

    struct Clear: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: tr("Remove every image."))
        @OptionGroup var bus: BusOptions

        func run() throws {
            let client = try bus.connect()
            do { _ = try client.removeAllImages() } catch { fail(error) }
        }
    }

    struct Stats: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: tr("Show the cache's usage, limits and counters."))
        @OptionGroup var bus: BusOptions

        func run() throws {
            let client = try bus.connect()
            let report: BlockingNetActivity.CacheReport
            do { report = try client.cacheReport() } catch { fail(error) }
            let p = report.properties
            func usage(
                _ used: ImageCacheMember.Property, _ capacity: ImageCacheMember.Property,
                _ after: ImageCacheMember.Property
            ) -> String {
                "\(Render.bytes(p[used.rawValue] ?? 0)) of \(Render.bytes(p[capacity.rawValue] ?? 0))"
                    + " (purges down to \(Render.bytes(p[after.rawValue] ?? 0)))"
            }
            writeLine("images:      \(p[ImageCacheMember.Property.imageCount.rawValue] ?? 0)")
            writeLine("usage:       " + usage(.memoryUsage, .memoryCapacity, .preferredMemoryUsageAfterPurge))
            for (name, value) in report.statistics {
                writeLine((name + ":").padded(to: 13) + String(value))
            }
            // The decoded pixels (FetchPixels, OpenPixels): a tier of its own, with its own counters.
            writeLine(tr("decoded pixels:"))
            writeLine(
                "  usage:                 "
                    + usage(.decodedMemoryUsage, .decodedMemoryCapacity, .decodedPreferredMemoryUsageAfterPurge))
            for (name, value) in report.decodedStatistics {
                writeLine("  " + (name + ":").padded(to: 23) + String(value))
            }
        }
    }
}

/// The whole file, or nil (errno set).
func readFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = read(fd, &chunk, chunk.count)
        if n < 0 {
            if errno == EINTR { continue }
            return nil
        }
        if n == 0 { return data }
        data.append(contentsOf: chunk[0..<n])
    }
}

/// Copies everything readable from `from` to `to`.
func copyAll(from: Int32, to: Int32) -> Bool {
    var chunk = [UInt8](repeating: 0, count: 1 << 20)
    while true {
        let n = read(from, &chunk, chunk.count)
        if n < 0 {
            if errno == EINTR { continue }
            return false
        }
        if n == 0 { return true }
        var off = 0
        while off < n {
            let w = chunk.withUnsafeBytes { write(to, $0.baseAddress! + off, n - off) }
            if w < 0 {
                if errno == EINTR { continue }
                return false
            }
            off += w
        }
    }
}

extension String {
    func padded(to width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
