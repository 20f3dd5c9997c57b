// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// The wire between netactivityd and netactivity-decoder: one SOCK_SEQPACKET message per request and
// per reply, host byte order (both ends run on one machine), each with at most one descriptor.
#ifndef NETACTIVITY_DECODER_PROTOCOL_H
#define NETACTIVITY_DECODER_PROTOCOL_H
#include <stddef.h>
#include <stdint.h>

#define DECODER_PROTOCOL_VERSION 3u
#define DECODER_REQUEST_MAGIC 0x5144414Eu  // "NADQ"
#define DECODER_REPLY_MAGIC 0x5244414Eu    // "NADR"

// A request carries a sealed memfd of encoded bytes.
struct decoder_request {
    uint32_t magic, version;
    uint64_t id;
    // The box the pixels must fit in, aspect kept, never enlarged (0: no limit on that side).
    uint32_t max_width, max_height;
    // The most pixels the reply may hold (TooLarge beyond, from the header).
    uint64_t max_pixels;
    // The most pixels the decoder may read for the image, whatever the box (TooLarge beyond, from
    // the header): a JPEG scaled in its IDCT still holds the whole source's coefficients.
    uint64_t max_source_pixels;
    // DECODER_COLOR_AS_IS: the file's own colour values, its profile not applied. DECODER_ANIMATION:
    // every frame of an animation (up to `max_frames`), each a whole canvas of the box's size, one
    // after another; `max_pixels` bounds them all together.
    uint32_t flags;
    uint32_t max_frames;
};

enum decoder_flags {
    DECODER_COLOR_AS_IS = 1u << 0,
    DECODER_ANIMATION = 1u << 1,
};

// The most frames one reply carries (and durations after it).
#define DECODER_MAX_FRAMES 1000u

// What the file said of its colours.
enum decoder_color_profile {
    DECODER_PROFILE_NONE = 0,     // nothing: its values are taken as sRGB
    DECODER_PROFILE_ICC = 1,      // an ICC profile
    DECODER_PROFILE_CICP = 2,     // coding-independent code points (AVIF, HEIF's nclx), not sRGB's
    DECODER_PROFILE_INVALID = 3,  // a profile that could not be read or does not fit the pixels: ignored
};

// What the pixels' values are.
enum decoder_color_space {
    DECODER_SPACE_SRGB = 0,   // sRGB: the file's own, or converted to it from its profile
    DECODER_SPACE_AS_IS = 1,  // the file's values under a profile that was not applied (DECODER_COLOR_AS_IS)
};

enum decoder_status {
    DECODER_OK = 0,
    DECODER_NOT_AN_IMAGE = 1,  // not a format the decoder reads
    DECODER_TOO_LARGE = 2,     // over `max_pixels`, known from the header before anything is allocated
    DECODER_FAILED = 3,        // damaged, truncated, or a feature the decoder does not read
    DECODER_BAD_REQUEST = 4,   // a malformed request (the agent's fault)
    DECODER_READY = 5,         // the first message, id 0, sent once the decoder is locked in (before any
                               // request is read); `message` says how (see decoder.c)
};

enum decoder_format {
    DECODER_FORMAT_B8G8R8A8_PREMULTIPLIED = 1,  // GDK_MEMORY_B8G8R8A8_PREMULTIPLIED, CAIRO_FORMAT_ARGB32 (LE)
};

// A reply with DECODER_OK carries a memfd sealed against write, grow, shrink and further seals, of
// `stride` x `height` x `frames_sent` bytes; the others carry none, and say why in `message`.
struct decoder_reply {
    uint32_t magic, status;
    uint64_t id;
    uint32_t width, height, stride, original_width, original_height, format;
    uint32_t color_profile, color_space;  // enum decoder_color_profile, enum decoder_color_space
    uint32_t frames;                      // frames in the file (1 for a still image)
    uint32_t frames_sent;                 // frames in the memfd: 1, or an animation's (DECODER_ANIMATION)
    uint32_t loop_count;                  // how often an animation plays (0: forever)
    uint32_t reserved;
    char message[200];
    // An animation's reply is followed, in the same message, by `frames_sent` durations: uint32 ms.
};

// Sends one message with `fd` attached (none when fd < 0), never raising SIGPIPE, without blocking
// when `nonblocking` (the agent's loop). Returns the bytes sent, or -1 (errno).
long decoder_send(int sock, const void *buf, size_t len, int fd, int nonblocking);

// Receives one message into `buf`, without blocking when `nonblocking`; its first descriptor in *fd
// (close-on-exec; -1 when none came), any others closed. Returns the message's length, 0 at the
// end, or -1 (errno; EMSGSIZE for a message longer than `len`, whose descriptor is closed).
long decoder_receive(int sock, void *buf, size_t len, int *fd, int nonblocking);

#endif
