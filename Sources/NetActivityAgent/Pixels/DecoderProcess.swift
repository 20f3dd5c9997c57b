// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import CDecoder
import Glibc
import LinuxKit
import NetActivityContract

/// One `netactivity-decoder` process: spawned with a SOCK_SEQPACKET socket as its standard input,
/// the agent's end of that socket (a loop watch, never a blocking read), and its reaping. What it
/// sends is read as a stranger's: every size checked before anything is mapped.
final class DecoderProcess {
    let pid: Int32
    let socket: Int32
    private let pidfd: Int32
    /// It sent its first message (ready, locked in).
    private(set) var saidReady = false
    /// Reaped already (its status read), so only its descriptors are left to close.
    private var reaped = false

    /// Starts `command` (`executable`, bare or inside bwrap); throws why when it cannot be started.
    init(_ command: [String], executable: String) throws(SystemError) {
        guard access(executable, X_OK) == 0 else {
            // Said here, not by a bwrap that would fail to find it (and be given up for it).
            throw SystemError(executable, errno: errno)
        }
        guard let (ours, theirs) = SeqPacket.pair() else { throw SystemError("no socket for a decoder", errno: errno) }
        do {
            pid = try ServiceProcess.spawn(command, standardInput: theirs)
        } catch {
            close(ours)
            close(theirs)
            throw error
        }
        close(theirs)
        socket = ours
        pidfd = ServiceProcess.pidfd(of: pid)
    }

    /// Hands it request `id`: `image` (a sealed memfd, kept by the caller), to fit `box`. Nil when
    /// sent, else why not (it has gone).
    func send(_ id: UInt64, image: Int32, ask: PixelAsk, limits: DecodeLimits) -> String? {
        var flags: UInt32 = ask.color == .asIs ? DECODER_COLOR_AS_IS.rawValue : 0
        if ask.maxFrames > 1 { flags |= DECODER_ANIMATION.rawValue }
        var request = decoder_request(
            magic: DECODER_REQUEST_MAGIC, version: DECODER_PROTOCOL_VERSION, id: id, max_width: ask.box.maxWidth,
            max_height: ask.box.maxHeight, max_pixels: limits.maxPixels, max_source_pixels: limits.maxSourcePixels,
            flags: flags, max_frames: ask.maxFrames)
        let sent = withUnsafeBytes(of: &request) { decoder_send(socket, $0.baseAddress, $0.count, image, 1) }
        guard sent != MemoryLayout<decoder_request>.size else { return nil }
        return "the image decoder took no request: \(String(cString: strerror(errno)))"
    }

    /// What one read of its socket brought.
    enum Message {
        /// Nothing yet.
        case nothing
        /// It is locked in (its first message).
        case ready
        /// The answer to request `id`: pixels, checked, or why not.
        case answer(id: UInt64, Result<DecodedPixels, DecodeFailure>)
        /// It ended (its socket closed or failed): why.
        case ended(String)
        /// It broke the protocol, or sent pixels not as promised: why.
        case misbehaved(String)
    }

    /// The largest message a decoder sends: a reply and an animation's durations.
    private static let maxMessage = MemoryLayout<decoder_reply>.size + 4 * Int(DECODER_MAX_FRAMES)
    private var message = [UInt8](repeating: 0, count: DecoderProcess.maxMessage)

    /// Reads one message; `ask` and `limits` are what its current request asked.
    func receive(ask: PixelAsk, limits: DecodeLimits) -> Message {
        var reply = decoder_reply()
        var fd: Int32 = -1
        let n = message.withUnsafeMutableBytes { decoder_receive(socket, $0.baseAddress, $0.count, &fd, 1) }
        if n < 0, errno == EAGAIN || errno == EINTR { return .nothing }
        let header = MemoryLayout<decoder_reply>.size
        if n >= header {
            message.withUnsafeBytes { raw in
                withUnsafeMutableBytes(of: &reply) {
                    $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[..<header]))
                }
            }
        }
        guard n >= header else {
            if fd >= 0 { close(fd) }
            // The end of its socket (0), or a reset one: it died or was killed.
            return n <= 0 ? .ended(stoppedWhy()) : .misbehaved("the image decoder's answer was malformed")
        }
        guard saidReady else {
            if fd >= 0 { close(fd) }
            guard reply.magic == DECODER_REPLY_MAGIC, reply.status == DECODER_READY.rawValue, reply.id == 0 else {
                return .misbehaved("the image decoder did not start as expected")
            }
            saidReady = true
            return .ready
        }
        guard reply.magic == DECODER_REPLY_MAGIC else {
            if fd >= 0 { close(fd) }
            return .misbehaved("the image decoder's answer was malformed")
        }
        // An animation's durations follow the reply: exactly as many as the frames it sent.
        let sent = Int(reply.frames_sent)
        guard reply.status != DECODER_OK.rawValue || (sent >= 1 && sent <= Int(ask.maxFrames)),
            n == header + (sent > 1 && reply.status == DECODER_OK.rawValue ? 4 * sent : 0)
        else {
            if fd >= 0 { close(fd) }
            return .misbehaved("the image decoder's answer was malformed")
        }
        let durations = (0..<(sent > 1 ? sent : 0)).map { k in
            message.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: header + 4 * k, as: UInt32.self) }
        }
        let result = Self.result(reply, fd: fd, box: ask.box, durations: durations, limits: limits)
        if case .failure(.failed(let why)) = result, reply.status == DECODER_OK.rawValue {
            // It said yes and sent what we cannot take: it is not to be trusted with the next one.
            return .misbehaved(why)
        }
        return .answer(id: reply.id, result)
    }

    /// What a reply means, its pixels checked as a stranger's would be: sealed against every change,
    /// exactly `stride` x `height` bytes for each of its frames (one, or one per duration), rows long
    /// enough, inside the box and the limit asked for.
    static func result(_ reply: decoder_reply, fd: Int32, box: PixelBox, durations: [UInt32], limits: DecodeLimits)
        -> Result<DecodedPixels, DecodeFailure>
    {
        let message = withUnsafeBytes(of: reply.message) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        guard reply.status == DECODER_OK.rawValue else {
            if fd >= 0 { close(fd) }
            return switch reply.status {
            case DECODER_NOT_AN_IMAGE.rawValue: .failure(.notAnImage(message))
            case DECODER_TOO_LARGE.rawValue: .failure(.tooLarge(message))
            default: .failure(.failed(message.isEmpty ? "the image could not be decoded" : message))
            }
        }
        guard fd >= 0 else { return .failure(.failed("the image decoder sent no pixels")) }
        var st = stat()
        // The decoder is the process an image may have taken over: every size it names is checked
        // with arithmetic that cannot overflow, and against the file itself, before anything is
        // mapped.
        let profiles: [DownloaderMember.FetchPixelsColorProfile] = [.none, .icc, .cicp, .invalid]
        let spaces: [PixelColor] = [.srgb, .asIs]
        guard SealedMemory.isSealedReadOnly(fd), fstat(fd, &st) == 0,
            reply.format == DECODER_FORMAT_B8G8R8A8_PREMULTIPLIED.rawValue,
            reply.color_profile < profiles.count, reply.color_space < spaces.count, reply.frames >= 1,
            let geometry = PixelGeometry(
                width: reply.width, height: reply.height, stride: reply.stride, frames: reply.frames_sent,
                maxPixels: limits.maxPixels),
            reply.frames >= reply.frames_sent, durations.allSatisfy({ $0 > 0 }),
            st.st_size >= 0, UInt64(st.st_size) == geometry.byteCount,
            box.maxWidth == 0 || reply.width <= box.maxWidth, box.maxHeight == 0 || reply.height <= box.maxHeight
        else {
            close(fd)
            return .failure(.failed("the image decoder's pixels were not as promised"))
        }
        // Kept as a read-only open made now, before any app holds the memory (the decoder's own
        // open goes).
        let own = SealedMemory.reopenReadOnly(fd)
        close(fd)
        guard let own else { return .failure(.failed("the image decoder's pixels could not be opened")) }
        return .success(
            DecodedPixels(
                fd: own, width: reply.width, height: reply.height, stride: reply.stride,
                originalWidth: reply.original_width, originalHeight: reply.original_height,
                colorProfile: profiles[Int(reply.color_profile)], colorSpace: spaces[Int(reply.color_space)],
                frames: reply.frames, frameDurations: durations, loopCount: reply.loop_count))
    }

    private func stoppedWhy() -> String {
        var status: Int32 = 0
        guard !reaped, waitpid(pid, &status, WNOHANG) == pid else { return "the image decoder closed its socket" }
        reaped = true
        if status & 0x7F != 0 { return "the image decoder was killed by signal \(status & 0x7F)" }
        return "the image decoder exited (status \((status >> 8) & 0xFF))"
    }

    /// Stops watching it and ends it: `kill` at once, else by closing its socket (it leaves at the
    /// end of its input). Either way it is reaped off the loop's path, through its pidfd when it has
    /// one (then `reaped` is called), else by a last `waitpid` after SIGKILL (an old kernel).
    func stop(kill killIt: Bool, loop: EventLoop, reaped done: @escaping () -> Void) {
        loop.unwatch(fd: socket)
        close(socket)
        if reaped {
            if pidfd >= 0 { close(pidfd) }
            return done()
        }
        if killIt { kill(pid, SIGKILL) }
        let pid = pid
        let pidfd = pidfd
        guard pidfd >= 0 else {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            return done()
        }
        loop.watch(fd: pidfd, events: EventLoop.readable) { [loop] _ in
            var status: Int32 = 0
            waitpid(pid, &status, WNOHANG)
            loop.unwatch(fd: pidfd)
            close(pidfd)
            done()
        }
    }
}

/// The pixel limits a decode is held to (`NetActivityLimits`' unless a test asks for less).
struct DecodeLimits: Equatable {
    var maxPixels = NetActivityLimits.maxDecodedPixels
    var maxSourcePixels = NetActivityLimits.maxSourcePixels
}
