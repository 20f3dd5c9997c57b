// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// A GTK-style app's main thread: a GLib main loop, not Swift's async main. With
// `NetActivity.runMainActorOnGLibMainContext()`, main-actor work (queued from any thread, and
// the library's main-actor faces) runs inside that loop, on the main thread. `make test` runs
// this (test_downloads.py, GLibMainActorTests) and checks what it prints.
import Glibc
import NetActivityClient

typealias LoopNew = @convention(c) (OpaquePointer?, Int32) -> OpaquePointer?
typealias LoopFunc = @convention(c) (OpaquePointer?) -> Void
typealias LoopIsRunning = @convention(c) (OpaquePointer?) -> Int32

// GLib as a GTK app has it: loaded in the process before the library looks for it.
guard let glib = dlopen("libglib-2.0.so.0", RTLD_NOW | RTLD_GLOBAL) else {
    print("libglib-2.0 is not installed")
    exit(77)
}
let loopNew = unsafeBitCast(dlsym(glib, "g_main_loop_new"), to: LoopNew.self)
let loopRun = unsafeBitCast(dlsym(glib, "g_main_loop_run"), to: LoopFunc.self)
let loopQuit = unsafeBitCast(dlsym(glib, "g_main_loop_quit"), to: LoopFunc.self)
let loopIsRunning = unsafeBitCast(dlsym(glib, "g_main_loop_is_running"), to: LoopIsRunning.self)

guard NetActivity.runMainActorOnGLibMainContext() else {
    print("GLib was not found in the process")
    exit(1)
}
let mainThread = pthread_self()
nonisolated(unsafe) let loop = loopNew(nil, 0)
/// Whether the GLib loop is running now (from the start of `g_main_loop_run` to its end).
var insideLoop: Bool { loopIsRunning(loop) != 0 }

@MainActor final class Window {
    var order: [Int] = []
    var offMainThread = 0
    var outsideLoop = 0
    var spinner: TaskSpinnerBinding?
    var spinnerSaw: CheckedContinuation<Bool, Never>?

    func note(_ i: Int) {
        order.append(i)
        if pthread_equal(pthread_self(), mainThread) == 0 { offMainThread += 1 }
        if !insideLoop { outsideLoop += 1 }
    }

    /// Whether a main-actor binding's closure runs on the main thread, inside the GLib loop.
    func follow(_ task: NetActivityTask, of activity: NetActivity) async -> Bool {
        await withCheckedContinuation { done in
            spinnerSaw = done
            spinner = TaskSpinnerBinding(activity) { [unowned self] animating in
                guard animating, let done = self.spinnerSaw else { return }
                self.spinnerSaw = nil
                done.resume(returning: pthread_equal(pthread_self(), mainThread) != 0 && insideLoop)
            }
            spinner?.bind(to: task)
        }
    }
}

let window = Window()
// Main-actor work from other threads, before and while the loop runs.
Task.detached {
    for i in 0..<100 { await window.note(i) }
    let activity = await NetActivity.connect()
    let task = try await activity.beginTask("glib probe")
    let onLoop = await window.follow(task, of: activity)
    try await task.complete()
    await MainActor.run {
        print(
            "main actor on GLib: \(window.order.count) jobs, in order: \(window.order == Array(0..<100)), "
                + "off the main thread: \(window.offMainThread), outside the loop: \(window.outsideLoop), binding on the loop: \(onLoop)"
        )
        loopQuit(loop)
    }
    activity.close()
}
loopRun(loop)
print("the GLib loop returned")
