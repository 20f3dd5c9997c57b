// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Dispatch
import Glibc
import NetActivityClient
import Synchronization
import Testing

/// `CallbackExecutor.glibMainContext()`: jobs on GLib's default main context, in order, on the
/// thread that runs its loop (a GTK app's UI thread). GLib is loaded here as a GTK app has it.
@Suite("GLib main context")
struct GLibTests {
    typealias LoopNew = @convention(c) (OpaquePointer?, Int32) -> OpaquePointer?
    typealias LoopFunc = @convention(c) (OpaquePointer?) -> Void

    @Test("jobs run on the loop's thread, one at a time and in the order given")
    func jobsOnTheLoopThread() async throws {
        let glib = try #require(dlopen("libglib-2.0.so.0", RTLD_NOW | RTLD_GLOBAL), "libglib-2.0 is not installed")
        let loopNew = unsafeBitCast(dlsym(glib, "g_main_loop_new"), to: LoopNew.self)
        let loopRun = unsafeBitCast(dlsym(glib, "g_main_loop_run"), to: LoopFunc.self)
        let loopQuit = unsafeBitCast(dlsym(glib, "g_main_loop_quit"), to: LoopFunc.self)
        let executor = try #require(CallbackExecutor.glibMainContext())

        struct Loop: @unchecked Sendable { let pointer: OpaquePointer? }  // GMainLoop is thread-safe
        let loop = Loop(pointer: loopNew(nil, 0))
        let loopThread = Mutex<pthread_t?>(nil)
        let ran = Recorder<Int>()
        let elsewhere = Atomic<Int>(0)
        // The jobs are queued before the loop runs: none may run on the thread that queued them.
        for i in 0..<100 {
            executor {
                if loopThread.withLock({ $0.map { pthread_equal($0, pthread_self()) != 0 } }) != true {
                    elsewhere.add(1, ordering: .relaxed)
                }
                ran.append(i)
            }
        }
        executor { loopQuit(loop.pointer) }
        let done = Recorder<Bool>()
        DispatchQueue.global().async {
            loopThread.withLock { $0 = pthread_self() }
            loopRun(loop.pointer)
            done.append(true)
        }
        _ = try await done.wait(for: 1, within: 10)
        #expect(ran.values == Array(0..<100))
        #expect(elsewhere.load(ordering: .relaxed) == 0, "every job ran on the loop's thread")
    }
}
