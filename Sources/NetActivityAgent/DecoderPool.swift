// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import CDecoder
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityCore

/// Decodes images in `netactivity-decoder` processes (see its source: the sandbox it locks itself
/// in before it reads a byte), so that no decoder runs in the agent. Where bubblewrap is installed
/// and works, each decoder runs inside it too (`bubblewrapArguments`); where it does not (no user
/// namespaces for it), the first decoder that ends before it says it is ready tells the pool so, and
/// the pool starts its decoders without it from then on, the waiting request untouched. The loop never waits on one:
/// each decoder's socket is a loop watch, each request has a deadline, and a decoder that crashes,
/// stops or overruns is killed and replaced while its request alone fails. Up to `maxDecoders` run
/// at once, one request each; a decoder that has had nothing to do for `idleTimeout` is let go.
final class DecoderPool {
    private let executable: String
    /// bwrap's path while it is used; nil when it is not installed, or did not work here.
    private(set) var bubblewrap: String?
    /// Why bubblewrap was given up (for the log and the tests).
    private(set) var bubblewrapFailure: String?
    /// Told what the log should hear (bubblewrap given up).
    var warn: (String) -> Void = { _ in }
    private let loop: EventLoop
    let maxDecoders: Int
    let timeout: Duration
    let idleTimeout: Duration

    /// Images that may wait for a decoder (the accounts' `.decoderQueue`, charged to the owner,
    /// an app's leaf): each holds a descriptor while it waits, so a client that asks for thousands
    /// cannot run the agent out. Past the budget, an owner is admitted only under its fair share
    /// (the apps waiting, and the processes of the unscoped pool within it), so forked processes
    /// never fill the queue for everyone.
    private let accounts: AgentAccounts

    private final class Job {
        let id: UInt64
        let image: Int32
        let box: Box
        let owner: String
        /// Kept until the job is done: a decoder that never started is given it again.
        var completion: ((Result<DecodedPixels, Failure>) -> Void)?
        init(
            id: UInt64, image: Int32, box: Box, owner: String,
            completion: @escaping (Result<DecodedPixels, Failure>) -> Void
        ) {
            self.id = id
            self.image = image
            self.box = box
            self.owner = owner
            self.completion = completion
        }
        deinit { Closer.close(image) }
        /// Answers once; a cancelled job (no completion) hears nothing.
        func finish(_ result: Result<DecodedPixels, Failure>) {
            let completion = self.completion
            self.completion = nil
            completion?(result)
        }
    }

    /// One decoder process: the agent's end of its socket, and what it is doing.
    private final class Decoder {
        let pid: Int32
        let socket: Int32
        let pidfd: Int32
        /// Started inside bubblewrap.
        let wrapped: Bool
        /// It said it is locked in (its first message).
        var ready = false
        var job: Job?
        var deadline: TimerID?
        var idle: TimerID?
        var gone = false
        init(pid: Int32, socket: Int32, pidfd: Int32, wrapped: Bool) {
            self.pid = pid
            self.socket = socket
            self.pidfd = pidfd
            self.wrapped = wrapped
        }
    }

    private var decoders: [Decoder] = []
    /// What waits, per owner, in order; the next job is the first of the owner whose app runs the
    /// fewest decodes (then the owner running fewest, then the one waiting longest): one app's many
    /// images, or its many boxes of one, never make another app's image wait behind them all.
    private var waiting: [String: [Job]] = [:]
    private var waitingCount = 0
    private var nextID: UInt64 = 1
    /// Why the last decoder could not be started (an agent without its decoder answers each request so).
    private(set) var lastStartError: String?

    /// `bubblewrap`: bwrap's path, or nil to run the decoders in their own sandbox alone.
    init(
        executable: String, loop: EventLoop, bubblewrap: String? = DecoderPool.installedBubblewrap(),
        maxDecoders: Int = 2, timeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(30),
        accounts: AgentAccounts = AgentAccounts()
    ) {
        self.accounts = accounts
        self.executable = executable
        self.bubblewrap = bubblewrap
        self.loop = loop
        self.maxDecoders = maxDecoders
        self.timeout = timeout
        self.idleTimeout = idleTimeout
    }

    deinit {
        for decoder in decoders { stop(decoder, kill: true) }
    }

    /// bwrap where the system keeps it (not from PATH: the agent's environment is the session's).
    static func installedBubblewrap() -> String? {
        ["/usr/bin/bwrap", "/usr/local/bin/bwrap"].first { access($0, X_OK) == 0 }
    }

    /// bwrap's arguments for `executable`, after glycin's (GNOME's sandboxed loaders): every
    /// namespace its own (no network, no other process, no IPC), a root of /usr read-only, the
    /// merged-/usr links, the linker's cache and the decoder itself; no /home, /tmp, /proc or
    /// /dev, no environment, a session of its own (no terminal to write to), gone with the agent.
    static func bubblewrapArguments(_ bwrap: String, executable: String) -> [String] {
        var arguments = [
            bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--chdir", "/",
            "--ro-bind", "/usr", "/usr", "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
        ]
        for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = readlink(top, &buffer, buffer.count - 1)
            if n > 0 {
                arguments += ["--symlink", String(decoding: buffer[..<n], as: UTF8.self), top]
            } else if access(top, F_OK) == 0 {
                arguments += ["--ro-bind", top, top]
            }
        }
        if !executable.hasPrefix("/usr/") { arguments += ["--ro-bind", executable, executable] }
        return arguments + ["--", executable]
    }

    /// Decoder processes running now.
    var processCount: Int { decoders.count }
    /// Decoders started, and killed for dying, stopping, overrunning or lying (since the pool began).
    private(set) var started: UInt64 = 0
    private(set) var replaced: UInt64 = 0
    /// Their pids (for tests and logs).
    var pids: [Int32] { decoders.map(\.pid) }

    /// Decodes the image in `image` (a sealed memfd; the pool takes it and closes it) to fit `box`,
    /// for `owner`. `completion` comes once, on a later turn of the loop, unless the returned closure
    /// cancels it.
    func decode(
        image: Int32, box: Box, owner: String = "", _ completion: @escaping (Result<DecodedPixels, Failure>) -> Void
    ) -> () -> Void {
        if let refusal = accounts.check(.decoderQueue, connection: owner, leaf: owner) {
            Closer.close(image)
            let why =
                switch refusal {
                case .connection(let held):
                    "\(owner) has \(held) images waiting for the decoder; ask again when one is done"
                case .share(let held, let share):
                    "\(owner) has \(held) images waiting for the decoder, its share while others wait too (\(share)); ask again when one is done"
                case .total(let held): "\(held) images wait for the decoder; ask again"
                }
            _ = loop.schedule(afterNanoseconds: 0) { completion(.failure(.busy(why))) }
            return {}
        }
        let job = Job(id: nextID, image: image, box: box, owner: owner, completion: completion)
        nextID &+= 1
        waiting[owner, default: []].append(job)
        waitingCount += 1
        accounts.charge(.decoderQueue, connection: owner, leaf: owner)
        dispatch()
        return { job.completion = nil }
    }

    /// Images waiting for a decoder now.
    var waitingImages: Int { waitingCount }

    /// How many decodes each app and owner was given (a count that only grows), so that among the
    /// apps waiting, the one served least recently goes first.
    private var served: [String: UInt64] = [:]
    private var serviceCount: UInt64 = 0

    /// `job` no longer waits (sent, dropped or failed).
    private func leftQueue(_ job: Job) {
        waitingCount -= 1
        accounts.release(.decoderQueue, connection: job.owner, leaf: job.owner)
    }

    /// The owner whose first waiting job goes next (see `waiting`); cancelled jobs at the heads
    /// of the queues are dropped on the way.
    private func nextOwner() -> String? {
        var running: [Substring: Int] = [:]
        var runningByOwner: [String: Int] = [:]
        for decoder in decoders {
            guard let job = decoder.job else { continue }
            running[ClientIdentity.app(ofLeaf: job.owner), default: 0] += 1
            runningByOwner[job.owner, default: 0] += 1
        }
        var best: (owner: String, rank: (Int, Int, UInt64, UInt64, UInt64))?
        for owner in Array(waiting.keys) {
            while let first = waiting[owner]?.first, first.completion == nil {  // cancelled while it waited
                waiting[owner]!.removeFirst()
                leftQueue(first)
            }
            guard let first = waiting[owner]?.first else {
                waiting[owner] = nil
                continue
            }
            let app = ClientIdentity.app(ofLeaf: owner)
            let rank = (
                running[app] ?? 0, runningByOwner[owner] ?? 0, served[String(app)] ?? 0, served[owner] ?? 0, first.id
            )
            if best == nil || rank < best!.rank { best = (owner, rank) }
        }
        return best?.owner
    }

    /// Hands waiting jobs to idle decoders, starting decoders up to `maxDecoders`.
    private func dispatch() {
        while let owner = nextOwner() {
            guard let decoder = decoders.first(where: { $0.job == nil && !$0.gone }) ?? start() else { break }
            // `start` may have failed every waiting job.
            guard let job = waiting[owner]?.first else { continue }
            waiting[owner]!.removeFirst()
            if waiting[owner]!.isEmpty { waiting[owner] = nil }
            leftQueue(job)
            serviceCount += 1
            served[String(ClientIdentity.app(ofLeaf: owner))] = serviceCount
            served[owner] = serviceCount
            if served.count > 4 * accounts[.decoderQueue].limit { served = served.filter { waiting[$0.key] != nil } }
            send(job, to: decoder)
        }
    }

    /// A new decoder, if one more may run; a start that fails fails every waiting job.
    private func start() -> Decoder? {
        guard decoders.count < maxDecoders else { return nil }
        guard access(executable, X_OK) == 0 else {
            // Said here, not by a bwrap that would fail to find it (and be given up for it).
            failWaiting("the image decoder could not be started: \(executable): \(String(cString: strerror(errno)))")
            return nil
        }
        guard let (ours, theirs) = SeqPacket.pair() else {
            failWaiting("no socket for a decoder: \(String(cString: strerror(errno)))")
            return nil
        }
        let pid: Int32
        let arguments = bubblewrap.map { Self.bubblewrapArguments($0, executable: executable) } ?? [executable]
        do {
            pid = try ServiceProcess.spawn(arguments, standardInput: theirs)
        } catch {
            close(ours)
            close(theirs)
            failWaiting("the image decoder could not be started: \(error)")
            return nil
        }
        close(theirs)
        lastStartError = nil
        let decoder = Decoder(
            pid: pid, socket: ours, pidfd: ServiceProcess.pidfd(of: pid), wrapped: bubblewrap != nil)
        decoders.append(decoder)
        started += 1
        loop.watch(fd: decoder.socket, events: EventLoop.readable) { [weak self, weak decoder] _ in
            guard let self, let decoder else { return }
            self.readReply(from: decoder)
        }
        return decoder
    }

    private func failWaiting(_ why: String) {
        lastStartError = why
        let jobs = waiting.values.joined().sorted { $0.id < $1.id }
        waiting.removeAll()
        for job in jobs { leftQueue(job) }
        for job in jobs {
            // On a later turn: never inside the caller's own `decode`.
            _ = loop.schedule(afterNanoseconds: 0) { job.finish(.failure(.failed(why))) }
        }
    }

    private func send(_ job: Job, to decoder: Decoder) {
        if let idle = decoder.idle {
            loop.cancel(idle)
            decoder.idle = nil
        }
        var request = decoder_request(
            magic: DECODER_REQUEST_MAGIC, version: DECODER_PROTOCOL_VERSION, id: job.id, max_width: job.box.maxWidth,
            max_height: job.box.maxHeight, max_pixels: job.box.maxPixels)
        let sent = withUnsafeBytes(of: &request) {
            decoder_send(decoder.socket, $0.baseAddress, $0.count, job.image, 1)
        }
        guard sent == MemoryLayout<decoder_request>.size else {
            let why = "the image decoder took no request: \(String(cString: strerror(errno)))"
            if !decoder.ready, decoder.wrapped {  // gone before it started: as in readReply
                decoder.job = job
                giveUpBubblewrap(decoder, why)
                return
            }
            replace(decoder, failing: job, why)
            return
        }
        decoder.job = job
        decoder.deadline = loop.schedule(afterNanoseconds: timeout.nanoseconds) { [weak self, weak decoder] in
            guard let self, let decoder else { return }
            decoder.deadline = nil
            self.replace(decoder, failing: decoder.job, "the image decoder took longer than \(self.timeout)")
        }
    }

    private func readReply(from decoder: Decoder) {
        var reply = decoder_reply()
        var fd: Int32 = -1
        let n = withUnsafeMutableBytes(of: &reply) {
            decoder_receive(decoder.socket, $0.baseAddress, $0.count, &fd, 1)
        }
        if n < 0, errno == EAGAIN || errno == EINTR { return }
        if n <= 0, !decoder.ready, decoder.wrapped {
            // bwrap ended before the decoder said it was locked in: no attacker's byte was read
            // yet, so this is bwrap itself failing here (no user namespaces for it, say).
            giveUpBubblewrap(decoder, stoppedWhy(decoder))
            return
        }
        guard n == MemoryLayout<decoder_reply>.size else {
            if fd >= 0 { close(fd) }
            // The end of its socket (0), or a reset one: it died or was killed.
            replace(
                decoder, failing: decoder.job, n <= 0 ? stoppedWhy(decoder) : "the image decoder's answer was malformed"
            )
            return
        }
        if !decoder.ready {
            if fd >= 0 { close(fd) }
            guard reply.magic == DECODER_REPLY_MAGIC, reply.status == DECODER_READY.rawValue, reply.id == 0 else {
                replace(decoder, failing: decoder.job, "the image decoder did not start as expected")
                return
            }
            decoder.ready = true
            return
        }
        guard let job = decoder.job, reply.magic == DECODER_REPLY_MAGIC, reply.id == job.id else {
            if fd >= 0 { close(fd) }
            replace(decoder, failing: decoder.job, "the image decoder answered another request")
            return
        }
        decoder.job = nil
        if let deadline = decoder.deadline {
            loop.cancel(deadline)
            decoder.deadline = nil
        }
        let result = Self.result(reply, fd: fd, box: job.box)
        if case .failure(.failed(let why)) = result, reply.status == DECODER_OK.rawValue {
            // It said yes and sent what we cannot take: it is not to be trusted with the next one.
            replace(decoder, failing: job, why)
            return
        }
        job.finish(result)
        idleSoon(decoder)
        dispatch()
    }

    /// What a reply means, its pixels checked as a stranger's would be: sealed against every change,
    /// exactly `stride` x `height` bytes, rows long enough, inside the box asked for.
    private static func result(_ reply: decoder_reply, fd: Int32, box: Box) -> Result<DecodedPixels, Failure> {
        let message = withUnsafeBytes(of: reply.message) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        switch reply.status {
        case DECODER_OK.rawValue:
            guard fd >= 0 else { return .failure(.failed("the image decoder sent no pixels")) }
            var st = stat()
            // The decoder is the process an image may have taken over: every size it names is
            // checked with arithmetic that cannot overflow, and against the file itself, before
            // anything is mapped.
            guard SealedMemory.isSealedReadOnly(fd), fstat(fd, &st) == 0,
                reply.format == DECODER_FORMAT_B8G8R8A8_PREMULTIPLIED.rawValue,
                let geometry = PixelGeometry(
                    width: reply.width, height: reply.height, stride: reply.stride, maxPixels: box.maxPixels),
                st.st_size >= 0, UInt64(st.st_size) == geometry.byteCount,
                box.maxWidth == 0 || reply.width <= box.maxWidth, box.maxHeight == 0 || reply.height <= box.maxHeight
            else {
                close(fd)
                return .failure(.failed("the image decoder's pixels were not as promised"))
            }
            // Kept as a read-only open made now, before any app holds the memory (the decoder's
            // own open goes).
            let own = SealedMemory.reopenReadOnly(fd)
            close(fd)
            guard let own else { return .failure(.failed("the image decoder's pixels could not be opened")) }
            return .success(
                DecodedPixels(
                    fd: own, width: reply.width, height: reply.height, stride: reply.stride,
                    originalWidth: reply.original_width, originalHeight: reply.original_height))
        case DECODER_NOT_AN_IMAGE.rawValue:
            if fd >= 0 { close(fd) }
            return .failure(.notAnImage(message))
        case DECODER_TOO_LARGE.rawValue:
            if fd >= 0 { close(fd) }
            return .failure(.tooLarge(message))
        default:
            if fd >= 0 { close(fd) }
            return .failure(.failed(message.isEmpty ? "the image could not be decoded" : message))
        }
    }

    private func stoppedWhy(_ decoder: Decoder) -> String {
        var status: Int32 = 0
        if waitpid(decoder.pid, &status, WNOHANG) == decoder.pid {
            decoder.gone = true
            if status & 0x7F != 0 { return "the image decoder was killed by signal \(status & 0x7F)" }
            return "the image decoder exited (status \((status >> 8) & 0xFF))"
        }
        return "the image decoder closed its socket"
    }

    /// bwrap does not work here: the decoders run without it from now on, and the job `decoder` had
    /// waits again, first in line.
    private func giveUpBubblewrap(_ decoder: Decoder, _ why: String) {
        bubblewrapFailure = "bubblewrap (\(bubblewrap ?? "")) did not start the decoder: \(why)"
        bubblewrap = nil
        warn("\(bubblewrapFailure!); decoding in the decoder's own sandbox alone")
        let job = decoder.job
        decoder.job = nil
        if let job, job.completion != nil {
            waiting[job.owner, default: []].insert(job, at: 0)
            waitingCount += 1
            accounts.charge(.decoderQueue, connection: job.owner, leaf: job.owner)
        }
        replace(decoder, failing: nil, why)
    }

    /// The decoder is done for: killed and reaped, its job (if any) failed with `why`, and what
    /// waits goes to the others or a new one.
    private func replace(_ decoder: Decoder, failing job: Job?, _ why: String) {
        replaced += 1
        stop(decoder, kill: true)
        decoders.removeAll { $0 === decoder }
        if let job {
            _ = loop.schedule(afterNanoseconds: 0) { job.finish(.failure(.failed(why))) }
        }
        dispatch()
    }

    /// With nothing to do for `idleTimeout`, the decoder is let go (its socket closed, it leaves).
    private func idleSoon(_ decoder: Decoder) {
        guard decoder.idle == nil else { return }
        decoder.idle = loop.schedule(afterNanoseconds: idleTimeout.nanoseconds) { [weak self, weak decoder] in
            guard let self, let decoder, decoder.job == nil else { return }
            decoder.idle = nil
            self.stop(decoder, kill: false)
            self.decoders.removeAll { $0 === decoder }
        }
    }

    /// Stops watching the decoder and ends it: `kill` at once, else by closing its socket (it leaves
    /// at the end of its input). Either way it is reaped off the loop's path: through its pidfd when
    /// it has one, else by a last `waitpid` after SIGKILL.
    private func stop(_ decoder: Decoder, kill killIt: Bool) {
        loop.unwatch(fd: decoder.socket)
        close(decoder.socket)
        if let deadline = decoder.deadline { loop.cancel(deadline) }
        if let idle = decoder.idle { loop.cancel(idle) }
        decoder.deadline = nil
        decoder.idle = nil
        if decoder.gone {
            if decoder.pidfd >= 0 { close(decoder.pidfd) }
            return
        }
        if killIt { kill(decoder.pid, SIGKILL) }
        let pid = decoder.pid
        let pidfd = decoder.pidfd
        guard pidfd >= 0 else {
            // No pidfd (an old kernel): make sure it ends, and reap it now.
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            return
        }
        loop.watch(fd: pidfd, events: EventLoop.readable) { [loop] _ in
            var status: Int32 = 0
            waitpid(pid, &status, WNOHANG)
            loop.unwatch(fd: pidfd)
            close(pidfd)
        }
    }
}
