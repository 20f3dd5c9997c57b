// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import Synchronization

// A GTK app's UI thread runs GLib's main loop, where neither `DispatchQueue.main` nor a
// main-actor job runs by itself. Two ways in, with GLib found in the process (the app links it;
// the library never loads or links it):
// - `NetActivity.runMainActorOnGLibMainContext()`: the main queue (so the main actor) is drained
//   from the GLib main loop, and the library's main-actor faces work as they do anywhere;
// - `CallbackExecutor.glibMainContext()`: the executor form, jobs as GLib idle sources.

/// The few GLib functions used, looked up in the process.
private struct GLib: @unchecked Sendable {
    // @unchecked Sendable: C function pointers, immutable.
    typealias SourceFunc = @convention(c) (UnsafeMutableRawPointer?) -> Int32
    typealias UnixFDSourceFunc = @convention(c) (Int32, UInt32, UnsafeMutableRawPointer?) -> Int32
    typealias IdleAddFull =
        @convention(c) (Int32, SourceFunc, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> UInt32
    typealias UnixFDAdd = @convention(c) (Int32, UInt32, UnixFDSourceFunc, UnsafeMutableRawPointer?) -> UInt32
    let idleAddFull: IdleAddFull
    let unixFDAdd: UnixFDAdd

    static let G_PRIORITY_DEFAULT: Int32 = 0
    static let G_IO_IN: UInt32 = 1

    /// GLib as the process already has it, or nil.
    static let loaded: GLib? = {
        guard let handle = dlopen("libglib-2.0.so.0", RTLD_NOW | RTLD_NOLOAD),
            let idle = dlsym(handle, "g_idle_add_full"), let fd = dlsym(handle, "g_unix_fd_add")
        else { return nil }
        return GLib(
            idleAddFull: unsafeBitCast(idle, to: IdleAddFull.self), unixFDAdd: unsafeBitCast(fd, to: UnixFDAdd.self))
    }()
}

/// One job on its way through GLib's `gpointer`.
private final class GLibJob {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

@_silgen_name("_dispatch_get_main_queue_handle_4CF")
private func dispatchMainQueueHandle() -> Int32
@_silgen_name("_dispatch_main_queue_callback_4CF")
private func dispatchMainQueueCallback(_ message: UnsafeMutableRawPointer?)

private let mainQueueOnGLib = Mutex(false)

extension NetActivity {
    /// Runs main-actor work (and `DispatchQueue.main`) under a GLib main loop: `gtk_main`,
    /// `g_application_run` or `g_main_loop_run` on the default main context, on the main thread.
    /// Call it once before the loop runs; later calls do nothing. Returns false when GLib is not
    /// loaded in the process. Idle, it costs nothing: the loop wakes only when main-actor work is
    /// queued (libdispatch's own wake-up descriptor, as Foundation's run loop uses it).
    @discardableResult
    public static func runMainActorOnGLibMainContext() -> Bool {
        guard let glib = GLib.loaded else { return false }
        mainQueueOnGLib.withLock { installed in
            guard !installed else { return }
            installed = true
            _ = glib.unixFDAdd(
                dispatchMainQueueHandle(), GLib.G_IO_IN,
                { fd, _, _ in
                    // Reset the descriptor first: work queued during the drain wakes the loop again.
                    var count: UInt64 = 0
                    _ = read(fd, &count, 8)
                    dispatchMainQueueCallback(nil)
                    return 1  // G_SOURCE_CONTINUE
                }, nil)
        }
        return true
    }
}

extension CallbackExecutor {
    /// Jobs on GLib's default main context (a GTK app's UI thread), in order, each an idle source
    /// at default priority; nil when GLib is not loaded in the process.
    public static func glibMainContext() -> CallbackExecutor? {
        guard let glib = GLib.loaded else { return nil }
        return CallbackExecutor { job in
            let box = Unmanaged.passRetained(GLibJob(job)).toOpaque()
            _ = glib.idleAddFull(
                GLib.G_PRIORITY_DEFAULT,
                { data in
                    Unmanaged<GLibJob>.fromOpaque(data!).takeRetainedValue().run()
                    return 0  // G_SOURCE_REMOVE
                }, box, nil)
        }
    }
}
