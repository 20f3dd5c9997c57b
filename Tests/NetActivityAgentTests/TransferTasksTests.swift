// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract
import NetActivityCore
import Testing

@testable import NetActivityAgent

/// The downloader's transfers as the desktop sees them, through the real TaskService and
/// ActivityService on the manual clock.
@Suite("TransferTasks: activity from a transfer's start, a task object once a person could see it")
struct TransferTasksTests {
    let h = DriverHarness()
    let transfers: TransferTasks
    let cancels: Box

    final class Box { var values: [UInt64] = [] }

    init() {
        let cancels = Box()
        self.cancels = cancels
        transfers = TransferTasks(
            context: h.context, tasks: h.tasks, activity: h.activity, announceAfter: { .seconds(1) },
            cancel: { cancels.values.append($0) })
    }

    func taskPaths() -> [String] {
        h.signals.compactMap { entry in
            guard entry.message.member == "InterfacesAdded" else { return nil }
            var r = entry.message.reader()
            return try? r.readObjectPath()
        }
    }

    @Test("a short transfer is activity alone: no task object, and its activity ends with it")
    func short() {
        transfers.queued(1, url: "https://img.example.org/a.png")
        transfers.started(1)
        #expect(h.activity.total == 1, "activity from its start")
        h.at(0.5)
        transfers.progress(1, received: 10, expected: 10)
        transfers.ended(1, outcome: .success(()))
        h.at(2)
        #expect(h.activity.total == 0)
        #expect(taskPaths().isEmpty, "the bus never heard of it")
    }

    @Test("a transfer still running after the delay is published with its progress, suspended while paused, completed")
    func long() throws {
        transfers.queued(2, url: "https://img.example.org/big.png")
        transfers.started(2)
        transfers.progress(2, received: 100, expected: 1000)
        h.at(0.99)
        #expect(taskPaths().isEmpty)
        h.at(1.0)
        let path = try #require(taskPaths().first)
        let task = try #require(transfers.announce(2), "the published task, not another")
        #expect(task.path == path)
        #expect(task.record.progress.received == 100 && task.record.state == .running)
        #expect(h.activity.total == 1, "the task holds the activity the transfer held: not twice")
        transfers.paused(2)
        #expect(task.record.state == .suspended && h.activity.total == 0)
        transfers.started(2)
        #expect(task.record.state == .running && h.activity.total == 1)
        transfers.ended(2, outcome: .success(()))
        #expect(task.record.state == .completed && task.record.error.isEmpty)
        #expect(h.activity.total == 0)
    }

    @Test("announce publishes at once, suspended while queued; a cancelled transfer's task ends Cancelled")
    func announced() throws {
        transfers.queued(3, url: "https://img.example.org/c.png")
        transfers.noteReader("flatpak:org.example.A", of: 3)
        let task = try #require(transfers.announce(3))
        #expect(task.record.state == .suspended)
        #expect(task.readers == ["flatpak:org.example.A"], "the apps that asked may read it")
        transfers.noteReader("flatpak:org.example.B", of: 3)
        #expect(task.readers.count == 2)
        // A panel's cancel reaches the downloader with the transfer.
        task.onCancelRequest?()
        #expect(cancels.values == [3])
        transfers.ended(3, outcome: .failure(.cancelled))
        #expect(task.record.error == NetActivityError.Name.cancelled.rawValue)
        #expect(transfers.announce(3) == nil, "an ended transfer has no task to publish")
    }

    @Test("a failure's task error names it, cut to the task error limit")
    func failure() throws {
        transfers.queued(4, url: "https://img.example.org/d.png")
        let task = try #require(transfers.announce(4))
        let long = String(repeating: "x", count: 2 * NetActivityLimits.maxTaskErrorBytes)
        transfers.ended(4, outcome: .failure(.failed(NetActivityError(.http, long))))
        #expect(task.record.error.hasPrefix(NetActivityError.Name.http.rawValue + ": xxx"))
        #expect(task.record.error.utf8.count <= NetActivityLimits.maxTaskErrorBytes)
    }
}
