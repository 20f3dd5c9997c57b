// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// netactivity-decoder: decodes images for netactivityd, in a sandbox of its own.
//
// Image decoders are the classic way in for bytes from the network (libwebp's CVE-2023-4863 was
// exploited in the wild), so they never run in the agent. This process is started by the agent with
// one SOCK_SEQPACKET socket as its standard input, loads its libraries, and then locks itself in
// before it reads anything: no new privileges, a network namespace of its own where the kernel lets
// it make one, an address-space and a CPU-time limit, and a seccomp allow-list with no open, socket,
// connect, execve or new process (a thread of its own is allowed: libheif's HEVC decoder starts one). Each request is one message with a sealed memfd of encoded bytes; each reply
// one message with a sealed memfd of pixels (B8G8R8A8, premultiplied, rows 4-byte aligned: what
// GTK 4, cairo and Qt take as they are on little-endian), or a status saying why not.
//
// Formats: PNG (libspng; APNG's frames too, each made a PNG of its own), JPEG (libjpeg-turbo, with
// its scaled IDCT when a smaller box is asked, and the EXIF orientation applied; CMYK and YCCK
// converted; at most 100 scans, and CPU and memory in proportion to its pixels; 12-bit JPEGs are
// refused as a format it does not read), WebP (libwebp, scaled by the decoder itself), GIF (giflib,
// its frames composed on its logical screen), AVIF (libavif with dav1d, in this thread), HEIF/HEIC
// (libheif) and JPEG XL (libjxl, no thread pool): 10- and 12-bit images go through 16 bits to the
// colour conversion, and HDR (PQ, HLG) is mapped into SDR. The reply says how many frames the file
// has; asked for the animation, it carries them all (GIF, APNG, WebP, AVIF). With --svg, SVG alone
// (librsvg): a process of its own, so that no raster decode loads librsvg's libraries.
//
// Colours: an ICC profile (PNG's iCCP, JPEG's APP2 pieces, WebP's ICCP, AVIF's and HEIF's colr,
// JPEG XL's own) or CICP code points other than sRGB's are converted to sRGB with lcms2, unless the
// request asks for the file's own values; a profile that cannot be read or does not fit the pixels
// is ignored, and the reply says so.
//
// The agent runs it inside bubblewrap where bwrap works (a root of /usr alone, every namespace its
// own, no environment); the lock below holds in any case.
//
// One file on purpose, read top to bottom: the lock comes before any input, and the seccomp
// allow-list must name exactly the calls the decoders below it make, so they are read together.
//
// netactivity-decoder              serve requests on standard input (a SOCK_SEQPACKET socket)
// netactivity-decoder --test-sandbox   lock in, then try what the sandbox forbids and print each result
#define _GNU_SOURCE
#include <avif/avif.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gif_lib.h>
#include <jxl/decode.h>
#include <lcms2.h>
#include <libheif/heif.h>
#include <librsvg/rsvg.h>
#include <math.h>
#include <stdio.h>  // before jpeglib.h, which uses FILE
#include <jpeglib.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <seccomp.h>
#include <setjmp.h>
#include <spng.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <webp/decode.h>
#include <webp/demux.h>
#include <zlib.h>

#include "decoder_protocol.h"

// ---- the libraries loaded by name -----------------------------------------------------------------

// libavif and libjxl change their sonames between Debian releases (libavif15 and libjxl0.7 in
// Debian 12, libavif16 and libjxl0.11 in 13), and a package built on one must install on the next:
// they are loaded with dlopen, at start and before the lock, by the soname this decoder was built
// against (AVIF_SONAME, JXL_SONAME: the Makefile reads them off the build's libraries), so that
// the headers and the library agree. Where one is not installed, its format is not read, and the
// reply says so. The other libraries keep their sonames across releases and are linked.
#ifndef AVIF_SONAME
#define AVIF_SONAME "libavif.so.15"
#endif
#ifndef JXL_SONAME
#define JXL_SONAME "libjxl.so.0.7"
#endif
#define AVIF_FUNCTIONS(X) \
    X(avifDecoderCreate) X(avifDecoderDestroy) X(avifDecoderNextImage) X(avifDecoderParse) \
    X(avifDecoderSetIOMemory) X(avifImageYUVToRGB) X(avifRGBImageSetDefaults) X(avifResultToString)
#define JXL_FUNCTIONS(X) \
    X(JxlDecoderCloseInput) X(JxlDecoderCreate) X(JxlDecoderDestroy) X(JxlDecoderGetBasicInfo) \
    X(JxlDecoderGetColorAsEncodedProfile) X(JxlDecoderGetColorAsICCProfile) X(JxlDecoderGetICCProfileSize) \
    X(JxlDecoderImageOutBufferSize) X(JxlDecoderProcessInput) X(JxlDecoderSetImageOutBuffer) \
    X(JxlDecoderSetInput) X(JxlDecoderSubscribeEvents)
#define POINTER(name) static __typeof__(name) *loaded_##name;
AVIF_FUNCTIONS(POINTER)
JXL_FUNCTIONS(POINTER)
#undef POINTER

// Each library's functions, all found, or the library is not used.
static int have_avif, have_jxl;

static int load_library(const char *soname, void **handle) {
    *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    return *handle != NULL;
}

static void load_optional_libraries(void) {
    void *avif, *jxl;
    have_avif = load_library(AVIF_SONAME, &avif);
    have_jxl = load_library(JXL_SONAME, &jxl);
#define FIND(library, name) \
    if (have_##library && !(loaded_##name = (__typeof__(name) *)dlsym(library, #name))) have_##library = 0;
#define FIND_AVIF(name) FIND(avif, name)
#define FIND_JXL(name) FIND(jxl, name)
    AVIF_FUNCTIONS(FIND_AVIF)
    JXL_FUNCTIONS(FIND_JXL)
#undef FIND_AVIF
#undef FIND_JXL
#undef FIND
}

// Calls below go through the loaded pointers.
#define avifDecoderCreate (*loaded_avifDecoderCreate)
#define avifDecoderDestroy (*loaded_avifDecoderDestroy)
#define avifDecoderNextImage (*loaded_avifDecoderNextImage)
#define avifDecoderParse (*loaded_avifDecoderParse)
#define avifDecoderSetIOMemory (*loaded_avifDecoderSetIOMemory)
#define avifImageYUVToRGB (*loaded_avifImageYUVToRGB)
#define avifRGBImageSetDefaults (*loaded_avifRGBImageSetDefaults)
#define avifResultToString (*loaded_avifResultToString)
#define JxlDecoderCloseInput (*loaded_JxlDecoderCloseInput)
#define JxlDecoderCreate (*loaded_JxlDecoderCreate)
#define JxlDecoderDestroy (*loaded_JxlDecoderDestroy)
#define JxlDecoderGetBasicInfo (*loaded_JxlDecoderGetBasicInfo)
#define JxlDecoderGetColorAsEncodedProfile (*loaded_JxlDecoderGetColorAsEncodedProfile)
#define JxlDecoderGetColorAsICCProfile (*loaded_JxlDecoderGetColorAsICCProfile)
#define JxlDecoderGetICCProfileSize (*loaded_JxlDecoderGetICCProfileSize)
#define JxlDecoderImageOutBufferSize (*loaded_JxlDecoderImageOutBufferSize)
#define JxlDecoderProcessInput (*loaded_JxlDecoderProcessInput)
#define JxlDecoderSetImageOutBuffer (*loaded_JxlDecoderSetImageOutBuffer)
#define JxlDecoderSetInput (*loaded_JxlDecoderSetInput)
#define JxlDecoderSubscribeEvents (*loaded_JxlDecoderSubscribeEvents)

typedef struct {
    uint32_t status;
    char message[sizeof(((struct decoder_reply *)0)->message)];
} outcome;

static outcome fail(uint32_t status, const char *format, ...) __attribute__((format(printf, 2, 3)));
static outcome fail(uint32_t status, const char *format, ...) {
    outcome o = {.status = status};
    va_list args;
    va_start(args, format);
    vsnprintf(o.message, sizeof o.message, format, args);
    va_end(args);
    return o;
}

// ---- geometry -------------------------------------------------------------------------------------

// The size that fits in the box (0: no limit on that side), aspect kept, never enlarged, at least 1.
static void fit(uint32_t w, uint32_t h, uint32_t max_w, uint32_t max_h, uint32_t *tw, uint32_t *th) {
    double scale = 1;
    if (max_w && w > max_w) scale = (double)max_w / w;
    if (max_h && h > max_h && (double)max_h / h < scale) scale = (double)max_h / h;
    *tw = scale < 1 ? (uint32_t)(w * scale + 0.5) : w;
    *th = scale < 1 ? (uint32_t)(h * scale + 0.5) : h;
    if (*tw == 0) *tw = 1;
    if (*th == 0) *th = 1;
    if (max_w && *tw > max_w) *tw = max_w;
    if (max_h && *th > max_h) *th = max_h;
}

// EXIF orientation 5 to 8 swap width and height.
static int swaps(int orientation) { return orientation >= 5 && orientation <= 8; }

// Where pixel (x, y) of the displayed image (dw x dh) lies in the stored one (EXIF orientation 1-8).
static void stored(int orientation, uint32_t x, uint32_t y, uint32_t dw, uint32_t dh, uint32_t *sx, uint32_t *sy) {
    switch (orientation) {
    case 2: *sx = dw - 1 - x; *sy = y; break;
    case 3: *sx = dw - 1 - x; *sy = dh - 1 - y; break;
    case 4: *sx = x; *sy = dh - 1 - y; break;
    case 5: *sx = y; *sy = x; break;
    case 6: *sx = y; *sy = dw - 1 - x; break;
    case 7: *sx = dh - 1 - y; *sy = dw - 1 - x; break;
    case 8: *sx = dh - 1 - y; *sy = x; break;
    default: *sx = x; *sy = y; break;
    }
}

// ---- the reply's pixels ---------------------------------------------------------------------------

// The reply's pixels go into their memfd by pwrite, a strip of rows at a time, from a small buffer
// that stays in the cache (decoding into a mapping of the memfd instead costs a page fault per
// 4 KiB, and a whole-image buffer a copy from memory). A decoder that needs the whole image at
// once (WebP) gets a buffer of the process's own, kept for the next image up to 32 MiB.
typedef struct {
    int fd;
    uint32_t width, height, stride;  // of one frame
    size_t size;
    uint8_t *whole;  // canvas_whole's buffer, written at the seal
    uint32_t frames;  // frames written (an animation's), or 1
    uint32_t row0;    // where the frame being written starts
} canvas;

#define STRIP_BYTES (256u << 10)
#define WHOLE_KEPT (32u << 20)
static uint8_t *strip, *whole;
static size_t strip_size, whole_size;

static uint8_t *grown(uint8_t **buffer, size_t *size, size_t needed) {
    if (needed > *size) {
        free(*buffer);
        *buffer = malloc(needed);
        *size = *buffer ? needed : 0;
    }
    return *buffer;
}

static int canvas_make(canvas *c, uint32_t w, uint32_t h) {
    c->width = w, c->height = h, c->stride = w * 4;  // 4 bytes a pixel: rows are 4-byte aligned
    c->size = (size_t)c->stride * h;
    c->whole = NULL;
    c->frames = 1, c->row0 = 0;
    c->fd = memfd_create("netactivity-pixels", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    return c->fd < 0 ? -1 : 0;
}

// An animation's canvas: frames of `w` x `h` one after another, added by `canvas_add_frame`.
static int canvas_make_frames(canvas *c, uint32_t w, uint32_t h) {
    if (canvas_make(c, w, h) != 0) return -1;
    c->frames = 0;
    return 0;
}

// Rows per strip, and the strip buffer (NULL without memory).
static uint32_t strip_rows(const canvas *c) {
    uint32_t rows = STRIP_BYTES / c->stride;
    return rows ? rows : 1;
}
static uint8_t *canvas_strip(const canvas *c) { return grown(&strip, &strip_size, (size_t)strip_rows(c) * c->stride); }

// Writes `rows` rows from `data` (`stride` bytes apart) at row `y`; 0, or -1 with errno.
static int canvas_write(canvas *c, uint32_t y, uint32_t rows, const uint8_t *data, size_t stride) {
    if (stride != c->stride) {
        for (uint32_t r = 0; r < rows; r++)
            if (canvas_write(c, y + r, 1, data + r * stride, c->stride) != 0) return -1;
        return 0;
    }
    size_t length = (size_t)rows * c->stride, done = 0;
    while (done < length) {
        ssize_t n = pwrite(c->fd, data + done, length - done, (off_t)((size_t)(c->row0 + y) * c->stride + done));
        if (n <= 0) return -1;
        done += (size_t)n;
    }
    return 0;
}

// The whole image in one buffer, for decoders that write it at once; written at the seal.
static uint8_t *canvas_whole(canvas *c) { return c->whole = grown(&whole, &whole_size, c->size); }

static void let_go_of_a_large_whole(void) {
    if (whole_size > WHOLE_KEPT) free(whole), whole = NULL, whole_size = 0;
}

// Every byte written and sealed against every change: what the agent checks before it takes it.
static int canvas_seal(canvas *c) {
    if (c->whole && canvas_write(c, 0, c->height, c->whole, c->stride) != 0) return -1;
    c->whole = NULL;
    let_go_of_a_large_whole();
    c->size = (size_t)c->stride * c->height * c->frames;
    if (ftruncate(c->fd, (off_t)c->size) != 0) return -1;  // the size it has once every row is in
    return fcntl(c->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
}

static void canvas_drop(canvas *c) {
    let_go_of_a_large_whole();
    c->whole = NULL;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

// Resamples premultiplied BGRA `src` (sw x sh, stored) into the canvas (its size, displayed),
// averaging the area each destination pixel covers (a box filter: what downscaling needs); applies
// `orientation`. The same size upright is written straight from `src`; an upright scale reads its
// rows in place; only EXIF-rotated images map each pixel through `stored`. 0, or -1 with errno.
static int resample(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride, int orientation, canvas *out) {
    uint32_t tw = out->width, th = out->height;
    uint32_t dw = swaps(orientation) ? sh : sw, dh = swaps(orientation) ? sw : sh;
    if (orientation == 1 && tw == sw && th == sh) return canvas_write(out, 0, th, src, sstride);
    uint8_t *rows = canvas_strip(out);
    // Each destination column's first source column; one more entry for the last one's end.
    uint32_t *columns = malloc(((size_t)tw + 1) * sizeof *columns);
    if (!rows || !columns) return free(columns), errno = ENOMEM, -1;
    for (uint32_t x = 0; x <= tw; x++) columns[x] = (uint32_t)((uint64_t)x * dw / tw);
    uint32_t per_strip = strip_rows(out);
    for (uint32_t first = 0; first < th; first += per_strip) {
        uint32_t count = th - first < per_strip ? th - first : per_strip;
        for (uint32_t y = first; y < first + count; y++) {
            uint32_t y0 = (uint32_t)((uint64_t)y * dh / th), y1 = (uint32_t)((uint64_t)(y + 1) * dh / th);
            if (y1 <= y0) y1 = y0 + 1;
            uint8_t *row = rows + (size_t)(y - first) * out->stride;
            for (uint32_t x = 0; x < tw; x++) {
                uint32_t x0 = columns[x], x1 = columns[x + 1] > x0 ? columns[x + 1] : x0 + 1;
                uint64_t sum[4] = {0, 0, 0, 0};
                for (uint32_t yy = y0; yy < y1; yy++) {
                    if (orientation == 1) {
                        const uint8_t *p = src + yy * sstride + (size_t)x0 * 4;
                        for (uint32_t xx = x0; xx < x1; xx++, p += 4)
                            sum[0] += p[0], sum[1] += p[1], sum[2] += p[2], sum[3] += p[3];
                        continue;
                    }
                    for (uint32_t xx = x0; xx < x1; xx++) {
                        uint32_t sx, sy;
                        stored(orientation, xx, yy, dw, dh, &sx, &sy);
                        const uint8_t *p = src + sy * sstride + (size_t)sx * 4;
                        sum[0] += p[0], sum[1] += p[1], sum[2] += p[2], sum[3] += p[3];
                    }
                }
                uint64_t n = (uint64_t)(x1 - x0) * (y1 - y0);
                for (int c = 0; c < 4; c++) row[x * 4 + c] = (uint8_t)((sum[c] + n / 2) / n);
            }
        }
        if (canvas_write(out, first, count, rows, out->stride) != 0) return free(columns), -1;
    }
    free(columns);
    return 0;
}

// Adds a frame of premultiplied BGRA (`w` x `h`, upright) to an animation's canvas, fit to its size.
static int canvas_add_frame(canvas *c, const uint8_t *bgra, uint32_t w, uint32_t h, size_t stride) {
    c->row0 = c->frames * c->height;
    if (resample(bgra, w, h, stride, 1, c) != 0) return -1;
    c->frames++;
    return 0;
}

// ---- animations -----------------------------------------------------------------------------------

// What an animation's reply says beside its pixels: each frame's duration and how often it plays.
static struct {
    uint32_t loops;
    uint32_t durations[DECODER_MAX_FRAMES];
} timing;

// The frames a request wants of a file that has `frames` (1 unless it asks for the animation).
static uint32_t frames_wanted(const struct decoder_request *rq, uint32_t frames) {
    if (!(rq->flags & DECODER_ANIMATION) || frames <= 1) return 1;
    uint32_t most = rq->max_frames && rq->max_frames < DECODER_MAX_FRAMES ? rq->max_frames : DECODER_MAX_FRAMES;
    return frames < most ? frames : most;
}

// A frame's duration as browsers show it: what the file says, but 0 and 10 ms (common in old GIFs,
// meant as "as fast as you can") play at 100 ms.
static uint32_t shown_duration(uint32_t ms) { return ms <= 10 ? 100 : ms; }

// Whether `frames` frames of the box's size are more than the reply may hold (said from the header).
static int frames_too_large(const char *format, uint32_t w, uint32_t h, uint32_t frames,
                            const struct decoder_request *rq, outcome *why) {
    uint32_t tw, th;
    fit(w, h, rq->max_width, rq->max_height, &tw, &th);
    if ((uint64_t)tw * th * frames <= rq->max_pixels) return 0;
    *why = fail(DECODER_TOO_LARGE, "%s of %u frames of %u x %u pixels is over the limit", format, frames, tw, th);
    return 1;
}

// ---- colour ---------------------------------------------------------------------------------------

// What the reply says of the colours and the frames of the image it answers (set by each decode).
static struct {
    uint32_t profile, space, frames;
} report;

// sRGB, the space every reply's pixels are in unless the request asks for the file's own values.
// Made before the lock (lcms2 only allocates).
static cmsHPROFILE srgb;

// A file's colour description: an ICC profile, else CICP code points (ITU-T H.273; 0 when none).
typedef struct {
    const uint8_t *icc;
    size_t icc_size;
    int primaries, transfer;
} colour_tag;

// CICP code points that are sRGB already (BT.709 primaries, the sRGB or BT.709 curve, or unspecified).
static int cicp_is_srgb(int primaries, int transfer) {
    return (primaries == 0 || primaries == 1 || primaries == 2) &&
           (transfer == 0 || transfer == 1 || transfer == 2 || transfer == 6 || transfer == 13);
}

// SDR white in the HDR curves: 203 cd/m2 (ITU-R BT.2408) is 1.0; brighter highlights roll off
// smoothly into what 8-bit sRGB can show instead of clipping.
static double roll_off(double x) {
    const double knee = 0.75;
    if (x <= knee) return x;
    double over = x - knee;
    return knee + over / (1 + over / (1 - knee));
}

static double pq_to_linear(double v) {  // SMPTE ST 2084, in cd/m2
    const double m1 = 2610.0 / 16384, m2 = 2523.0 / 4096 * 128, c1 = 3424.0 / 4096, c2 = 2413.0 / 4096 * 32,
                 c3 = 2392.0 / 4096 * 32;
    double p = pow(v, 1 / m2), n = p - c1 > 0 ? p - c1 : 0;
    return 10000 * pow(n / (c2 - c3 * p), 1 / m1);
}

static double hlg_to_linear(double v) {  // ARIB STD-B67, shown on a 1000 cd/m2 display (system gamma 1.2)
    const double a = 0.17883277, b = 1 - 4 * a, c = 0.5 - a * log(4 * a);
    double scene = v <= 0.5 ? v * v / 3 : (exp((v - c) / a) + b) / 12;
    return 1000 * pow(scene, 1.2);
}

// H.273 transfer characteristics as a tone curve (encoded value to linear light, SDR white 1.0).
static cmsToneCurve *transfer_curve(int transfer) {
    switch (transfer) {
    case 1: case 6: case 14: case 15: {  // BT.709, BT.601, BT.2020
        double p[5] = {1 / 0.45, 1 / 1.099, 0.099 / 1.099, 1 / 4.5, 0.081};
        return cmsBuildParametricToneCurve(NULL, 4, p);
    }
    case 4: return cmsBuildGamma(NULL, 2.2);
    case 5: return cmsBuildGamma(NULL, 2.8);
    case 8: return cmsBuildGamma(NULL, 1.0);
    case 16: case 18: {  // PQ and HLG: high dynamic range, mapped into SDR
        enum { N = 4096 };
        static float table[N];
        for (int i = 0; i < N; i++) {
            double v = (double)i / (N - 1);
            table[i] = (float)roll_off((transfer == 16 ? pq_to_linear(v) : hlg_to_linear(v)) / 203);
        }
        return cmsBuildTabulatedToneCurveFloat(NULL, N, table);
    }
    default: {  // sRGB (13), and what is unspecified
        double p[5] = {2.4, 1 / 1.055, 0.055 / 1.055, 1 / 12.92, 0.04045};
        return cmsBuildParametricToneCurve(NULL, 4, p);
    }
    }
}

// An RGB profile for CICP code points, or NULL for primaries this decoder does not know.
static cmsHPROFILE cicp_profile(int primaries, int transfer) {
    static const struct { int code; double r[2], g[2], b[2], w[2]; } known[] = {
        {1, {0.64, 0.33}, {0.30, 0.60}, {0.15, 0.06}, {0.3127, 0.3290}},      // BT.709, sRGB
        {2, {0.64, 0.33}, {0.30, 0.60}, {0.15, 0.06}, {0.3127, 0.3290}},      // unspecified: as BT.709
        {5, {0.64, 0.33}, {0.29, 0.60}, {0.15, 0.06}, {0.3127, 0.3290}},      // BT.601 625
        {6, {0.630, 0.340}, {0.310, 0.595}, {0.155, 0.070}, {0.3127, 0.3290}},  // BT.601 525
        {9, {0.708, 0.292}, {0.170, 0.797}, {0.131, 0.046}, {0.3127, 0.3290}},  // BT.2020
        {11, {0.680, 0.320}, {0.265, 0.690}, {0.150, 0.060}, {0.314, 0.351}},   // DCI-P3
        {12, {0.680, 0.320}, {0.265, 0.690}, {0.150, 0.060}, {0.3127, 0.3290}}, // Display P3
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        if (known[i].code != primaries) continue;
        cmsCIExyY white = {known[i].w[0], known[i].w[1], 1};
        cmsCIExyYTRIPLE rgb = {{known[i].r[0], known[i].r[1], 1}, {known[i].g[0], known[i].g[1], 1},
                               {known[i].b[0], known[i].b[1], 1}};
        cmsToneCurve *curve = transfer_curve(transfer);
        if (!curve) return NULL;
        cmsToneCurve *curves[3] = {curve, curve, curve};
        cmsHPROFILE profile = cmsCreateRGBProfile(&white, &rgb, curves);
        cmsFreeToneCurve(curve);
        return profile;
    }
    return NULL;
}

// A conversion to sRGB. Most profiles (every CICP one, and the ICC profiles cameras and phones
// write: Display P3, Adobe RGB) are a matrix and three curves, as sRGB is: for 8-bit pixels
// converted in place those are tables of this decoder's own (each channel's curve to 16-bit linear
// light, a fixed-point matrix, sRGB's curve from 12-bit linear), a few times faster than lcms2's
// general 8-bit path; anything else (a LUT profile, CMYK, 16-bit input) is lcms2's transform.
typedef struct {
    cmsHTRANSFORM lcms;
    int red;                 // the fast path: where red is in each 4 bytes (0: RGBA, 2: BGRA)
    uint16_t in[3][256];     // each channel to linear light, 0..65535
    int32_t matrix[3][3];    // linear source RGB to linear sRGB, 1.0 = 4096
} colour_conv;

static uint8_t srgb_encoded[4096];  // linear light (12 bits) to sRGB's curve

static void fast_tables(void) {
    for (int i = 0; i < 4096; i++) {
        double v = i / 4095.0;
        v = v <= 0.0031308 ? 12.92 * v : 1.055 * pow(v, 1 / 2.4) - 0.055;
        srgb_encoded[i] = (uint8_t)(v * 255 + 0.5);
    }
}

// The matrix-shaper parts of `profile` (its colorants, D50-adapted, and curves), or 0.
static int matrix_shaper(cmsHPROFILE profile, double m[3][3], cmsToneCurve *curves[3]) {
    static const cmsTagSignature colorants[3] = {cmsSigRedColorantTag, cmsSigGreenColorantTag, cmsSigBlueColorantTag};
    static const cmsTagSignature trcs[3] = {cmsSigRedTRCTag, cmsSigGreenTRCTag, cmsSigBlueTRCTag};
    if (!cmsIsMatrixShaper(profile) || cmsGetColorSpace(profile) != cmsSigRgbData) return 0;
    for (int c = 0; c < 3; c++) {
        const cmsCIEXYZ *xyz = cmsReadTag(profile, colorants[c]);
        if (!xyz || !(curves[c] = cmsReadTag(profile, trcs[c]))) return 0;
        m[0][c] = xyz->X, m[1][c] = xyz->Y, m[2][c] = xyz->Z;
    }
    return 1;
}

static int invert(const double a[3][3], double out[3][3]) {
    double det = a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
                 a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
    if (fabs(det) < 1e-9) return 0;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            int r1 = (c + 1) % 3, r2 = (c + 2) % 3, c1 = (r + 1) % 3, c2 = (r + 2) % 3;
            out[r][c] = (a[r1][c1] * a[r2][c2] - a[r1][c2] * a[r2][c1]) / det;
        }
    return 1;
}

// Fills `conv`'s tables for `from` into sRGB, when both are matrix-shapers; 0 otherwise.
static int fast_conv(cmsHPROFILE from, colour_conv *conv) {
    double src[3][3], dst[3][3], inverse[3][3];
    cmsToneCurve *curves[3], *unused[3];
    if (!matrix_shaper(from, src, curves) || !matrix_shaper(srgb, dst, unused) || !invert(dst, inverse)) return 0;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            double v = 0;
            for (int k = 0; k < 3; k++) v += inverse[r][k] * src[k][c];
            if (fabs(v) > 2.5) return 0;  // a matrix no display space makes: lcms2's general path
            conv->matrix[r][c] = (int32_t)lround(v * 4096);
        }
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 256; i++) {
            float v = cmsEvalToneCurveFloat(curves[c], (float)(i / 255.0));
            conv->in[c][i] = (uint16_t)lrintf((v < 0 ? 0 : v > 1 ? 1 : v) * 65535);
        }
    return 1;
}

// Converts `count` pixels of 4 bytes in place with the fast path's tables.
static inline int32_t clamp12(int32_t v) { return v < 0 ? 0 : v > 4095 ? 4095 : v; }

static void fast_convert(const colour_conv *conv, uint8_t *p, size_t count) {
    int ri = conv->red, bi = 2 - conv->red;
    const int32_t(*m)[3] = conv->matrix;
    for (size_t i = 0; i < count; i++, p += 4) {
        // 16-bit linear × 12-bit fixed point (|m| <= 2.5 with 1.0 = 4096: no sum leaves 31 bits),
        // to 12-bit linear: (v × m) >> 16.
        int32_t r = conv->in[0][p[ri]], g = conv->in[1][p[1]], b = conv->in[2][p[bi]];
        int32_t x = (m[0][0] * r + m[0][1] * g + m[0][2] * b) >> 16, y = (m[1][0] * r + m[1][1] * g + m[1][2] * b) >> 16,
                z = (m[2][0] * r + m[2][1] * g + m[2][2] * b) >> 16;
        p[ri] = srgb_encoded[clamp12(x)], p[1] = srgb_encoded[clamp12(y)], p[bi] = srgb_encoded[clamp12(z)];
    }
}

// Converts `count` pixels from `in` to `out` (the same buffer for 8-bit pixels in place).
static void convert(const colour_conv *conv, const void *in, void *out, size_t count) {
    if (conv->lcms) cmsDoTransform(conv->lcms, in, out, (cmsUInt32Number)count);
    else fast_convert(conv, out, count);
}

static void conv_free(colour_conv *conv) {
    if (!conv) return;
    if (conv->lcms) cmsDeleteTransform(conv->lcms);
    free(conv);
}

// The conversion from what `tag` describes to sRGB for pixels of `format` (lcms2's TYPE_...: RGB
// layouts, or CMYK for a CMYK JPEG), or NULL when the values are to be kept as they are: no
// profile, an sRGB one, the request asked for them as-is, or a profile that does not fit (said
// in `report`).
static colour_conv *colour_transform(const colour_tag *tag, cmsUInt32Number format, cmsUInt32Number to,
                                     const struct decoder_request *rq) {
    report.profile = DECODER_PROFILE_NONE, report.space = DECODER_SPACE_SRGB;
    cmsHPROFILE from = NULL;
    if (tag->icc && tag->icc_size) {
        from = cmsOpenProfileFromMem(tag->icc, (cmsUInt32Number)tag->icc_size);
        cmsColorSpaceSignature wanted = T_COLORSPACE(format) == PT_CMYK ? cmsSigCmykData : cmsSigRgbData;
        if (!from || cmsGetColorSpace(from) != wanted) {
            if (from) cmsCloseProfile(from);
            report.profile = DECODER_PROFILE_INVALID;
            return NULL;
        }
        report.profile = DECODER_PROFILE_ICC;
    } else if (tag->primaries || tag->transfer) {
        if (cicp_is_srgb(tag->primaries, tag->transfer)) return NULL;
        if (!(from = cicp_profile(tag->primaries, tag->transfer))) {
            report.profile = DECODER_PROFILE_INVALID;
            return NULL;
        }
        report.profile = DECODER_PROFILE_CICP;
    } else {
        return NULL;
    }
    if (rq->flags & DECODER_COLOR_AS_IS) {
        cmsCloseProfile(from);
        report.space = DECODER_SPACE_AS_IS;
        return NULL;
    }
    colour_conv *conv = calloc(1, sizeof *conv);
    int in_place_8bit = format == to && (format == TYPE_RGBA_8 || format == TYPE_BGRA_8);
    if (conv && in_place_8bit && fast_conv(from, conv)) {
        conv->red = format == TYPE_RGBA_8 ? 0 : 2;  // alpha stays where it is
    } else if (conv) {
        // In place, alpha is left as it is; from another buffer it is copied.
        cmsUInt32Number flags = T_EXTRA(format) && format != to ? cmsFLAGS_COPY_ALPHA : 0;
        conv->lcms = cmsCreateTransform(from, format, srgb, to, INTENT_RELATIVE_COLORIMETRIC, flags);
        if (!conv->lcms) {
            free(conv), conv = NULL;
            report.profile = DECODER_PROFILE_INVALID;
        }
    }
    cmsCloseProfile(from);
    return conv;
}

// A decoded image on its way to the reply: straight-alpha RGBA of 8 or 16 bits a sample (host
// order), as stored; `orientation` (EXIF's 1-8) turns it as shown.
typedef struct {
    uint8_t *pixels;
    uint32_t width, height;
    int sixteen;
    int orientation;
    colour_tag tag;
} rgba_image;

// Its colours to sRGB (unless asked as-is), 8 bits, premultiplied BGRA, in place (in the first
// half of a 16-bit image's buffer).
static void prepare(rgba_image *image, const struct decoder_request *rq) {
    uint32_t w = image->width, h = image->height;
    size_t count = (size_t)w * h;
    uint8_t *rgba = image->pixels;
    colour_conv *t = colour_transform(&image->tag, image->sixteen ? TYPE_RGBA_16 : TYPE_RGBA_8, TYPE_RGBA_8, rq);
    if (image->sixteen) {
        // Into the first half of its own buffer: each 8-bit row ends before the 16-bit one it comes from.
        const uint16_t *wide = (const uint16_t *)image->pixels;
        if (t) {
            for (uint32_t y = 0; y < h; y++) convert(t, wide + (size_t)y * w * 4, rgba + (size_t)y * w * 4, w);
        } else {
            for (size_t i = 0; i < count * 4; i++) rgba[i] = (uint8_t)((wide[i] * 255u + 32767u) / 65535u);
        }
    } else if (t) {
        convert(t, rgba, rgba, count);
    }
    conv_free(t);
    // RGBA, straight alpha -> BGRA, premultiplied, in place (an opaque pixel is only swapped).
    for (size_t i = 0; i < count * 4; i += 4) {
        uint8_t r = rgba[i], g = rgba[i + 1], b = rgba[i + 2], a = rgba[i + 3];
        if (a == 255) {
            rgba[i] = b, rgba[i + 2] = r;
            continue;
        }
        rgba[i] = (uint8_t)((b * a + 127) / 255);
        rgba[i + 1] = (uint8_t)((g * a + 127) / 255);
        rgba[i + 2] = (uint8_t)((r * a + 127) / 255);
    }
}

// `prepare`d, fit to the box and turned: the reply's pixels. Takes `image->pixels` (freed).
static outcome finish(rgba_image *image, const struct decoder_request *rq, canvas *out) {
    uint32_t w = image->width, h = image->height;
    uint8_t *rgba = image->pixels;
    prepare(image, rq);
    uint32_t dw = swaps(image->orientation) ? h : w, dh = swaps(image->orientation) ? w : h, tw, th;
    fit(dw, dh, rq->max_width, rq->max_height, &tw, &th);
    outcome result = {.status = DECODER_OK};
    if (canvas_make(out, tw, th) != 0 || resample(rgba, w, h, (size_t)w * 4, image->orientation, out) != 0) {
        canvas_drop(out);
        result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
    }
    free(image->pixels);
    image->pixels = NULL;
    return result;
}

// Whether an image of `w` x `h` may be decoded (the source limit, and the reply's once fit to the
// box); else why not, from its header.
static int too_large(const char *format, uint32_t w, uint32_t h, const struct decoder_request *rq, outcome *why) {
    uint32_t tw, th;
    fit(w, h, rq->max_width, rq->max_height, &tw, &th);
    if ((uint64_t)w * h <= rq->max_source_pixels && (uint64_t)tw * th <= rq->max_pixels) return 0;
    *why = fail(DECODER_TOO_LARGE, "%s of %u x %u pixels is over the limit", format, w, h);
    return 1;
}

// The reply's 16-bit buffer for an image of `w` x `h`, or NULL.
static uint8_t *rgba_buffer(uint32_t w, uint32_t h, int sixteen) {
    return malloc((size_t)w * h * 4 * (sixteen ? 2 : 1));
}

// ---- AVIF -----------------------------------------------------------------------------------------

// The largest image an ISO base media file (AVIF, HEIF) says it holds: its "ispe" boxes (a box of
// 20 bytes: size, type, version and flags, width, height) in its first MiB, where the metadata
// is. TooLarge from them before any library allocates for it.
static int ispe_too_large(const char *format, const uint8_t *data, size_t size, const struct decoder_request *rq,
                          outcome *why) {
    size_t end = size < (1u << 20) ? size : (1u << 20);
    for (const uint8_t *at = data + 4; at + 16 <= data + end;) {
        const uint8_t *box = memmem(at, (size_t)(data + end - at), "ispe", 4);
        if (!box || box + 16 > data + end) break;
        at = box + 4;
        if (box - data < 4 || box[-4] != 0 || box[-3] != 0 || box[-2] != 0 || box[-1] != 20) continue;
        uint32_t w = (uint32_t)box[8] << 24 | (uint32_t)box[9] << 16 | (uint32_t)box[10] << 8 | box[11];
        uint32_t h = (uint32_t)box[12] << 24 | (uint32_t)box[13] << 16 | (uint32_t)box[14] << 8 | box[15];
        if (too_large(format, w, h, rq, why)) return 1;
    }
    return 0;
}

// HEIF's rotation (anticlockwise quarter turns) and mirror (0: top and bottom, 1: left and right,
// after the rotation) as the EXIF orientation that shows the same.
static int heif_orientation(int quarter_turns, int mirror) {
    static const int plain[4] = {1, 8, 3, 6}, left_right[4] = {2, 7, 4, 5}, top_bottom[4] = {4, 5, 2, 7};
    quarter_turns &= 3;
    return mirror == 1 ? left_right[quarter_turns] : mirror == 0 ? top_bottom[quarter_turns] : plain[quarter_turns];
}

static outcome decode_avif(const uint8_t *data, size_t size, const struct decoder_request *rq, canvas *out,
                           uint32_t *ow, uint32_t *oh) {
    outcome result = {.status = DECODER_OK};
    if (ispe_too_large("AVIF", data, size, rq, &result)) return result;
    avifDecoder *decoder = avifDecoderCreate();
    if (!decoder) return fail(DECODER_FAILED, "no memory for an AVIF decoder");
    rgba_image image = {0};
    decoder->maxThreads = 1;  // dav1d in this thread: the sandbox starts none
    decoder->imageSizeLimit = (uint32_t)(rq->max_source_pixels < UINT32_MAX ? rq->max_source_pixels : UINT32_MAX);
    decoder->strictFlags = AVIF_STRICT_DISABLED;  // files as browsers take them
    decoder->ignoreExif = decoder->ignoreXMP = AVIF_TRUE;
    avifResult status = avifDecoderSetIOMemory(decoder, data, size);
    if (status == AVIF_RESULT_OK) status = avifDecoderParse(decoder);
    if (status != AVIF_RESULT_OK) {
        result = fail(status == AVIF_RESULT_NOT_IMPLEMENTED ? DECODER_NOT_AN_IMAGE : DECODER_FAILED, "AVIF: %s",
                      avifResultToString(status));
        goto done;
    }
    avifImage *header = decoder->image;
    int turns = header->transformFlags & AVIF_TRANSFORM_IROT ? header->irot.angle : 0;
    image.orientation = heif_orientation(turns, header->transformFlags & AVIF_TRANSFORM_IMIR ? header->imir.mode : -1);
    *ow = swaps(image.orientation) ? header->height : header->width;
    *oh = swaps(image.orientation) ? header->width : header->height;
    report.frames = decoder->imageCount > 0 ? (uint32_t)decoder->imageCount : 1;
    uint32_t wanted = frames_wanted(rq, report.frames);
    if (too_large("AVIF", *ow, *oh, rq, &result) || frames_too_large("AVIF", *ow, *oh, wanted, rq, &result)) goto done;
    if ((status = avifDecoderNextImage(decoder)) != AVIF_RESULT_OK) {
        result = fail(DECODER_FAILED, "AVIF: %s", avifResultToString(status));
        goto done;
    }
    avifImage *frame = decoder->image;
    avifRGBImage rgb;
    avifRGBImageSetDefaults(&rgb, frame);
    rgb.format = AVIF_RGB_FORMAT_RGBA;
    rgb.depth = frame->depth > 8 ? 16 : 8;  // 10 and 12 bits kept to the colour conversion
    rgb.rowBytes = frame->width * 4 * (rgb.depth > 8 ? 2 : 1);
    image.sixteen = rgb.depth > 8;
    image.width = frame->width, image.height = frame->height;
    if (!(image.pixels = rgba_buffer(frame->width, frame->height, image.sixteen))) {
        result = fail(DECODER_TOO_LARGE, "no memory for the AVIF's pixels");
        goto done;
    }
    rgb.pixels = image.pixels;
    image.tag = (colour_tag){.icc = frame->icc.data, .icc_size = frame->icc.size,
                             .primaries = frame->colorPrimaries, .transfer = frame->transferCharacteristics};
    if (wanted == 1 && !image.sixteen && !image.tag.icc_size && cicp_is_srgb(image.tag.primaries, image.tag.transfer)) {
        // sRGB already, 8 bits: libavif (libyuv) writes the reply's premultiplied BGRA itself.
        rgb.format = AVIF_RGB_FORMAT_BGRA, rgb.alphaPremultiplied = AVIF_TRUE;
        if ((status = avifImageYUVToRGB(frame, &rgb)) != AVIF_RESULT_OK) {
            result = fail(DECODER_FAILED, "AVIF: %s", avifResultToString(status));
            goto done;
        }
        uint32_t tw, th;
        fit(*ow, *oh, rq->max_width, rq->max_height, &tw, &th);
        if (canvas_make(out, tw, th) != 0 ||
            resample(image.pixels, image.width, image.height, (size_t)image.width * 4, image.orientation, out) != 0) {
            canvas_drop(out);
            result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
        }
        goto done;
    }
    if ((status = avifImageYUVToRGB(frame, &rgb)) != AVIF_RESULT_OK) {
        result = fail(DECODER_FAILED, "AVIF: %s", avifResultToString(status));
        goto done;
    }
    if (wanted == 1) {
        result = finish(&image, rq, out);
        goto done;
    }
    // A sequence: each frame whole (AV1 frames need no composing), one after another.
    uint32_t tw, th;
    fit(image.width, image.height, rq->max_width, rq->max_height, &tw, &th);
    if (canvas_make_frames(out, tw, th) != 0) {
        result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
        goto done;
    }
    for (uint32_t k = 0; k < wanted; k++) {
        if (k > 0) {
            if (avifDecoderNextImage(decoder) != AVIF_RESULT_OK || decoder->image->width != image.width ||
                decoder->image->height != image.height || avifImageYUVToRGB(decoder->image, &rgb) != AVIF_RESULT_OK)
                break;  // a damaged tail: the frames before it
        }
        timing.durations[k] = shown_duration((uint32_t)(decoder->imageTiming.duration * 1000 + 0.5));
        prepare(&image, rq);
        if (canvas_add_frame(out, image.pixels, image.width, image.height, (size_t)image.width * 4) != 0) {
            result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
            canvas_drop(out);
            goto done;
        }
    }
done:
    free(image.pixels);
    avifDecoderDestroy(decoder);
    return result;
}

// ---- HEIF (HEIC) ----------------------------------------------------------------------------------

static outcome decode_heif(const uint8_t *data, size_t size, const struct decoder_request *rq, canvas *out,
                           uint32_t *ow, uint32_t *oh) {
    outcome result = {.status = DECODER_OK};
    if (ispe_too_large("HEIF", data, size, rq, &result)) return result;
    struct heif_context *context = heif_context_alloc();
    if (!context) return fail(DECODER_FAILED, "no memory for a HEIF decoder");
    struct heif_image_handle *handle = NULL;
    struct heif_image *decoded = NULL;
    struct heif_decoding_options *options = NULL;
    struct heif_color_profile_nclx *nclx = NULL;
    uint8_t *icc = NULL;
    rgba_image image = {0};
    heif_context_set_max_decoding_threads(context, 0);  // tiles one after another: no threads here
    heif_context_set_maximum_image_size_limit(context, 1 << 16);
    struct heif_error error = heif_context_read_from_memory_without_copy(context, data, size, NULL);
    if (error.code == heif_error_Ok) error = heif_context_get_primary_image_handle(context, &handle);
    if (error.code != heif_error_Ok) {
        result = fail(error.code == heif_error_Unsupported_filetype || error.code == heif_error_Unsupported_feature
                          ? DECODER_NOT_AN_IMAGE : DECODER_FAILED,
                      "HEIF: %s", error.message);
        goto done;
    }
    // The handle's size is the image as shown (its rotation and mirror applied by the decode).
    *ow = (uint32_t)heif_image_handle_get_width(handle), *oh = (uint32_t)heif_image_handle_get_height(handle);
    report.frames = 1;
    if (*ow == 0 || *oh == 0) {
        result = fail(DECODER_FAILED, "HEIF: an image without a size");
        goto done;
    }
    if (too_large("HEIF", *ow, *oh, rq, &result)) goto done;
    int sixteen = heif_image_handle_get_luma_bits_per_pixel(handle) > 8;
    options = heif_decoding_options_alloc();
    error = heif_decode_image(handle, &decoded, heif_colorspace_RGB,
                              sixteen ? heif_chroma_interleaved_RRGGBBAA_LE : heif_chroma_interleaved_RGBA, options);
    if (error.code != heif_error_Ok) {
        result = fail(DECODER_FAILED, "HEIF: %s", error.message);
        goto done;
    }
    int stride = 0;
    const uint8_t *plane = heif_image_get_plane_readonly(decoded, heif_channel_interleaved, &stride);
    uint32_t w = (uint32_t)heif_image_get_width(decoded, heif_channel_interleaved);
    uint32_t h = (uint32_t)heif_image_get_height(decoded, heif_channel_interleaved);
    int depth = heif_image_get_bits_per_pixel_range(decoded, heif_channel_interleaved);
    size_t row = (size_t)w * 4 * (sixteen ? 2 : 1);
    if (!plane || w != *ow || h != *oh || stride < 0 || (size_t)stride < row) {
        result = fail(DECODER_FAILED, "HEIF: the decoded image is not as its header said");
        goto done;
    }
    if (!(image.pixels = rgba_buffer(w, h, sixteen))) {
        result = fail(DECODER_TOO_LARGE, "no memory for the HEIF's pixels");
        goto done;
    }
    for (uint32_t y = 0; y < h; y++) memcpy(image.pixels + y * row, plane + (size_t)y * (size_t)stride, row);
    if (sixteen && depth > 8 && depth < 16) {
        // 10 or 12 bits in 16, to the full range (values past the range clamped); an image without
        // alpha opaque, whatever the library put there.
        uint16_t *p = (uint16_t *)image.pixels;
        uint32_t top = (1u << depth) - 1;
        int alpha = heif_image_handle_has_alpha_channel(handle);
        for (size_t i = 0; i < (size_t)w * h * 4; i++) {
            uint32_t v = p[i] < top ? p[i] : top;
            p[i] = (i & 3) == 3 && !alpha ? 65535 : (uint16_t)((v * 65535u + top / 2) / top);
        }
    }
    image.width = w, image.height = h, image.sixteen = sixteen, image.orientation = 1;
    enum heif_color_profile_type type = heif_image_handle_get_color_profile_type(handle);
    if (type == heif_color_profile_type_prof || type == heif_color_profile_type_rICC) {
        size_t n = heif_image_handle_get_raw_color_profile_size(handle);
        if (n > 0 && (icc = malloc(n)) && heif_image_handle_get_raw_color_profile(handle, icc).code == heif_error_Ok)
            image.tag.icc = icc, image.tag.icc_size = n;
    } else if (heif_image_handle_get_nclx_color_profile(handle, &nclx).code == heif_error_Ok && nclx) {
        image.tag.primaries = nclx->color_primaries, image.tag.transfer = nclx->transfer_characteristics;
    }
    result = finish(&image, rq, out);
done:
    free(image.pixels);
    free(icc);
    if (nclx) heif_nclx_color_profile_free(nclx);
    if (options) heif_decoding_options_free(options);
    if (decoded) heif_image_release(decoded);
    if (handle) heif_image_handle_release(handle);
    heif_context_free(context);
    return result;
}

// ---- JPEG XL --------------------------------------------------------------------------------------

static outcome decode_jxl(const uint8_t *data, size_t size, const struct decoder_request *rq, canvas *out,
                          uint32_t *ow, uint32_t *oh) {
    JxlDecoder *decoder = JxlDecoderCreate(NULL);  // no parallel runner: this thread alone
    if (!decoder) return fail(DECODER_FAILED, "no memory for a JPEG XL decoder");
    outcome result = {.status = DECODER_OK};
    rgba_image image = {0};
    uint8_t *icc = NULL;
    JxlBasicInfo info;
    JxlPixelFormat format = {4, JXL_TYPE_UINT8, JXL_NATIVE_ENDIAN, 0};
    if (JxlDecoderSubscribeEvents(decoder, JXL_DEC_BASIC_INFO | JXL_DEC_COLOR_ENCODING | JXL_DEC_FULL_IMAGE) !=
            JXL_DEC_SUCCESS ||
        JxlDecoderSetInput(decoder, data, size) != JXL_DEC_SUCCESS) {
        result = fail(DECODER_FAILED, "JPEG XL: the decoder could not be set up");
        goto done;
    }
    JxlDecoderCloseInput(decoder);
    for (;;) {
        JxlDecoderStatus status = JxlDecoderProcessInput(decoder);
        if (status == JXL_DEC_BASIC_INFO) {
            if (JxlDecoderGetBasicInfo(decoder, &info) != JXL_DEC_SUCCESS) break;
            // Shown with its orientation applied (the decoder turns it).
            int turned = info.orientation >= 5;
            *ow = turned ? info.ysize : info.xsize, *oh = turned ? info.xsize : info.ysize;
            report.frames = 1;
            if (too_large("JPEG XL", *ow, *oh, rq, &result)) goto done;
            if (info.bits_per_sample > 8) format.data_type = JXL_TYPE_UINT16, image.sixteen = 1;
        } else if (status == JXL_DEC_COLOR_ENCODING) {
            // Every JPEG XL has a colour encoding: sRGB's is no profile to apply; any other, as ICC.
            JxlColorEncoding encoding;
            if (JxlDecoderGetColorAsEncodedProfile(decoder, &format, JXL_COLOR_PROFILE_TARGET_DATA, &encoding) ==
                    JXL_DEC_SUCCESS &&
                (encoding.color_space == JXL_COLOR_SPACE_RGB || encoding.color_space == JXL_COLOR_SPACE_GRAY) &&
                encoding.white_point == JXL_WHITE_POINT_D65 &&
                (encoding.color_space == JXL_COLOR_SPACE_GRAY || encoding.primaries == JXL_PRIMARIES_SRGB) &&
                encoding.transfer_function == JXL_TRANSFER_FUNCTION_SRGB)
                continue;
            size_t n = 0;
            if (JxlDecoderGetICCProfileSize(decoder, &format, JXL_COLOR_PROFILE_TARGET_DATA, &n) == JXL_DEC_SUCCESS &&
                n > 0 && (icc = malloc(n)) &&
                JxlDecoderGetColorAsICCProfile(decoder, &format, JXL_COLOR_PROFILE_TARGET_DATA, icc, n) ==
                    JXL_DEC_SUCCESS)
                image.tag.icc = icc, image.tag.icc_size = n;
        } else if (status == JXL_DEC_NEED_IMAGE_OUT_BUFFER) {
            size_t n = 0;
            if (JxlDecoderImageOutBufferSize(decoder, &format, &n) != JXL_DEC_SUCCESS ||
                n != (size_t)*ow * *oh * 4 * (image.sixteen ? 2 : 1) ||
                !(image.pixels = rgba_buffer(*ow, *oh, image.sixteen)) ||
                JxlDecoderSetImageOutBuffer(decoder, &format, image.pixels, n) != JXL_DEC_SUCCESS) {
                result = fail(DECODER_FAILED, "JPEG XL: no room for the pixels");
                goto done;
            }
        } else if (status == JXL_DEC_FULL_IMAGE) {  // the first frame: enough
            image.width = *ow, image.height = *oh, image.orientation = 1;
            result = finish(&image, rq, out);
            goto done;
        } else {
            break;  // an error, or the input ended before an image
        }
    }
    result = fail(DECODER_FAILED, "JPEG XL: damaged or cut short");
done:
    free(image.pixels);
    free(icc);
    JxlDecoderDestroy(decoder);
    return result;
}

// ---- PNG ------------------------------------------------------------------------------------------

// ---- APNG -----------------------------------------------------------------------------------------

// An animated PNG's frames, each decoded by libspng (which reads no APNG chunks itself) from a PNG
// made of it: the file's IHDR at the frame's size, the chunks that describe the pixels (PLTE, tRNS,
// gAMA...), and its data (IDAT, or fdAT without its sequence number) as one IDAT. Each is drawn
// on the canvas as the file says (replacing its region, or over it), shown, then disposed of (left,
// cleared, or the canvas as it was before it).

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

typedef struct {
    uint8_t *data;
    size_t size, capacity;
} bytes;

static int bytes_add(bytes *b, const void *data, size_t size) {
    if (b->size + size > b->capacity) {
        size_t capacity = (b->size + size) * 2;
        uint8_t *grown = realloc(b->data, capacity);
        if (!grown) return -1;
        b->data = grown, b->capacity = capacity;
    }
    memcpy(b->data + b->size, data, size);
    b->size += size;
    return 0;
}

static int chunk_add(bytes *b, const char *type, const uint8_t *data, size_t size) {
    uint8_t head[8] = {(uint8_t)(size >> 24), (uint8_t)(size >> 16), (uint8_t)(size >> 8), (uint8_t)size,
                       (uint8_t)type[0], (uint8_t)type[1], (uint8_t)type[2], (uint8_t)type[3]};
    uLong crc = crc32(crc32(0, head + 4, 4), data, (uInt)size);
    uint8_t tail[4] = {(uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8), (uint8_t)crc};
    return bytes_add(b, head, 8) || bytes_add(b, data, size) || bytes_add(b, tail, 4) ? -1 : 0;
}

typedef struct {
    uint32_t width, height, x, y, delay_ms;
    uint8_t dispose, blend;
} apng_frame;

// Frame `f` (its data in `pixels`) as a PNG of its own, decoded to straight RGBA into `rgba`.
static int apng_decode_frame(const uint8_t *ihdr, const bytes *described, const bytes *pixels, const apng_frame *f,
                             uint8_t *rgba) {
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    uint8_t header[13];
    memcpy(header, ihdr, 13);
    for (int k = 0; k < 4; k++) header[k] = (uint8_t)(f->width >> (24 - 8 * k)), header[4 + k] = (uint8_t)(f->height >> (24 - 8 * k));
    bytes png = {0};
    int r = bytes_add(&png, signature, 8) || chunk_add(&png, "IHDR", header, 13) ||
            bytes_add(&png, described->data, described->size) || chunk_add(&png, "IDAT", pixels->data, pixels->size) ||
            chunk_add(&png, "IEND", NULL, 0);
    spng_ctx *ctx = r ? NULL : spng_ctx_new(0);
    size_t length = (size_t)f->width * f->height * 4, needed = 0;
    if (ctx) {
        spng_set_image_limits(ctx, 1u << 20, 1u << 20);
        r = spng_set_png_buffer(ctx, png.data, png.size) || spng_decoded_image_size(ctx, SPNG_FMT_RGBA8, &needed) ||
            needed != length || spng_decode_image(ctx, rgba, length, SPNG_FMT_RGBA8, SPNG_DECODE_TRNS);
        spng_ctx_free(ctx);
    }
    free(png.data);
    return ctx && !r ? 0 : -1;
}

// Draws a frame's straight RGBA on the canvas (straight RGBA too): its region replaced, or over it.
static void apng_draw(uint8_t *screen, uint32_t width, const uint8_t *rgba, const apng_frame *f) {
    for (uint32_t y = 0; y < f->height; y++) {
        uint8_t *d = screen + ((size_t)(f->y + y) * width + f->x) * 4;
        const uint8_t *s = rgba + (size_t)y * f->width * 4;
        if (f->blend == 0) {
            memcpy(d, s, (size_t)f->width * 4);
            continue;
        }
        for (uint32_t x = 0; x < f->width; x++, d += 4, s += 4) {
            unsigned sa = s[3], da = d[3], oa = sa + da * (255 - sa) / 255;
            for (int c = 0; c < 3 && oa; c++) d[c] = (uint8_t)((s[c] * sa + d[c] * da * (255 - sa) / 255) / oa);
            d[3] = (uint8_t)oa;
        }
    }
}

// Every frame of an APNG (up to the request's), whole canvases of the box's size, into `out`.
static outcome decode_apng(const uint8_t *data, size_t size, uint32_t frames, const colour_tag *tag,
                           const struct decoder_request *rq, canvas *out) {
    const uint8_t *ihdr = data + 16;
    uint32_t width = be32(ihdr), height = be32(ihdr + 4), wanted = frames_wanted(rq, frames), sent = 0;
    outcome result = {.status = DECODER_OK};
    if (frames_too_large("APNG", width, height, wanted, rq, &result)) return result;
    size_t canvas_bytes = (size_t)width * height * 4;
    uint8_t *screen = calloc(1, canvas_bytes), *previous = malloc(canvas_bytes), *shown = malloc(canvas_bytes);
    uint8_t *rgba = malloc(canvas_bytes);
    bytes described = {0}, pixels = {0};
    apng_frame f = {0};
    int in_frame = 0, seen_data = 0;
    uint32_t tw, th;
    fit(width, height, rq->max_width, rq->max_height, &tw, &th);
    if (!screen || !previous || !shown || !rgba || canvas_make_frames(out, tw, th) != 0) {
        result = fail(DECODER_TOO_LARGE, "no memory for the APNG's pixels");
        goto done;
    }
    for (size_t at = 8; at + 12 <= size && sent < wanted;) {
        uint32_t length = be32(data + at);
        const uint8_t *type = data + at + 4, *body = data + at + 8;
        if (length > size - at - 12) break;  // cut short: the frames before it
        at += 12 + (size_t)length;
        int ends_frame = memcmp(type, "fcTL", 4) == 0 || memcmp(type, "IEND", 4) == 0;
        if (ends_frame && in_frame && pixels.size > 0) {
            if (apng_decode_frame(ihdr, &described, &pixels, &f, rgba) != 0) break;  // damaged: the frames before it
            if (f.dispose == 2) memcpy(previous, screen, canvas_bytes);
            apng_draw(screen, width, rgba, &f);
            memcpy(shown, screen, canvas_bytes);
            rgba_image image = {.pixels = shown, .width = width, .height = height, .orientation = 1, .tag = *tag};
            prepare(&image, rq);
            if (canvas_add_frame(out, shown, width, height, (size_t)width * 4) != 0) {
                result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
                goto done;
            }
            timing.durations[sent++] = shown_duration(f.delay_ms);
            if (f.dispose == 1)
                for (uint32_t y = 0; y < f.height; y++)
                    memset(screen + ((size_t)(f.y + y) * width + f.x) * 4, 0, (size_t)f.width * 4);
            else if (f.dispose == 2)
                memcpy(screen, previous, canvas_bytes);
            in_frame = 0, pixels.size = 0;
        }
        if (memcmp(type, "fcTL", 4) == 0 && length >= 26) {
            f = (apng_frame){.width = be32(body + 4), .height = be32(body + 8), .x = be32(body + 12),
                             .y = be32(body + 16), .dispose = body[24], .blend = body[25]};
            uint32_t num = (uint32_t)body[20] << 8 | body[21], den = (uint32_t)body[22] << 8 | body[23];
            f.delay_ms = num * 1000 / (den ? den : 100);
            // A frame inside the canvas (no sum that wraps), with its own ops.
            if (!f.width || !f.height || f.x > width || f.width > width - f.x || f.y > height ||
                f.height > height - f.y || f.dispose > 2 || f.blend > 1)
                break;
            if (sent == 0 && f.dispose == 2) f.dispose = 1;  // the first frame's "previous" is the background
            in_frame = 1;
        } else if (memcmp(type, "IDAT", 4) == 0) {
            seen_data = 1;
            if (in_frame && bytes_add(&pixels, body, length) != 0) break;  // IDAT is frame 0 when a fcTL came first
        } else if (memcmp(type, "fdAT", 4) == 0 && length > 4) {
            if (in_frame && bytes_add(&pixels, body + 4, length - 4) != 0) break;
        } else if (!seen_data && memcmp(type, "IHDR", 4) != 0 && memcmp(type, "acTL", 4) != 0 &&
                   memcmp(type, "fcTL", 4) != 0) {
            // What describes the pixels (PLTE, tRNS, gAMA, ...), for every frame's PNG.
            if (chunk_add(&described, (const char *)type, body, length) != 0) break;
        }
    }
    if (sent == 0) result = fail(DECODER_FAILED, "APNG: no frame could be decoded");
done:
    if (result.status != DECODER_OK) canvas_drop(out);
    free(screen), free(previous), free(shown), free(rgba), free(described.data), free(pixels.data);
    return result;
}

// An APNG's frame count (its acTL, before the first IDAT), and how often it plays; 0 for a still PNG.
static uint32_t apng_frames(const uint8_t *data, size_t size, uint32_t *plays) {
    for (size_t at = 8; at + 12 <= size;) {
        uint32_t length = be32(data + at);
        if (length > size - at - 12) return 0;
        if (memcmp(data + at + 4, "IDAT", 4) == 0) return 0;
        if (memcmp(data + at + 4, "acTL", 4) == 0 && length >= 8) {
            *plays = be32(data + at + 12);
            return be32(data + at + 8);
        }
        at += 12 + (size_t)length;
    }
    return 0;
}

static outcome decode_png(const uint8_t *data, size_t size, const struct decoder_request *rq, canvas *out,
                          uint32_t *ow, uint32_t *oh) {
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx) return fail(DECODER_FAILED, "no memory for a PNG decoder");
    outcome result = {.status = DECODER_OK};
    uint8_t *rgba = NULL;
    struct spng_ihdr ihdr;
    spng_set_image_limits(ctx, 1u << 20, 1u << 20);
    spng_set_chunk_limits(ctx, 8u << 20, 64u << 20);
    spng_set_crc_action(ctx, SPNG_CRC_ERROR, SPNG_CRC_ERROR);
    int err = spng_set_png_buffer(ctx, data, size);
    if (!err) err = spng_get_ihdr(ctx, &ihdr);
    if (err) {
        result = fail(err == SPNG_EWIDTH || err == SPNG_EHEIGHT || err == SPNG_EUSER_WIDTH || err == SPNG_EUSER_HEIGHT
                          ? DECODER_TOO_LARGE : DECODER_FAILED,
                      "PNG: %s", spng_strerror(err));
        goto done;
    }
    *ow = ihdr.width, *oh = ihdr.height;
    uint64_t pixels = (uint64_t)ihdr.width * ihdr.height;
    if (pixels > rq->max_pixels || pixels > rq->max_source_pixels) {
        result = fail(DECODER_TOO_LARGE, "PNG of %u x %u pixels is over the limit of %llu", ihdr.width, ihdr.height,
                      (unsigned long long)rq->max_pixels);
        goto done;
    }
    uint32_t plays = 0, frames = apng_frames(data, size, &plays);
    report.frames = frames > 1 ? frames : 1;
    rgba_image image = {.width = ihdr.width, .height = ihdr.height, .orientation = 1};
    struct spng_iccp iccp;  // read with the chunks before the image data, not decoding it
    if (spng_get_iccp(ctx, &iccp) == 0) image.tag.icc = (const uint8_t *)iccp.profile, image.tag.icc_size = iccp.profile_len;
    if (frames_wanted(rq, report.frames) > 1) {
        // An animation asked whole: its frames, each decoded from its own chunks (the default image
        // is one of them only when a fcTL says so).
        timing.loops = plays;
        result = decode_apng(data, size, report.frames, &image.tag, rq, out);
        goto done;
    }
    size_t length;
    if ((err = spng_decoded_image_size(ctx, SPNG_FMT_RGBA8, &length))) {
        result = fail(DECODER_FAILED, "PNG: %s", spng_strerror(err));
        goto done;
    }
    if (!(rgba = malloc(length))) {
        result = fail(DECODER_TOO_LARGE, "no memory for %zu bytes of PNG pixels", length);
        goto done;
    }
    if ((err = spng_decode_image(ctx, rgba, length, SPNG_FMT_RGBA8, SPNG_DECODE_TRNS))) {
        result = fail(DECODER_FAILED, "PNG: %s", spng_strerror(err));
        goto done;
    }
    image.pixels = rgba;
    rgba = NULL;  // finish takes it
    result = finish(&image, rq, out);
done:
    free(rgba);
    spng_ctx_free(ctx);
    return result;
}

// ---- JPEG -----------------------------------------------------------------------------------------

struct jpeg_failure {
    struct jpeg_error_mgr manager;
    jmp_buf back;
    char message[JMSG_LENGTH_MAX];
    struct jpeg_progress_mgr progress;
    uint64_t cpu_deadline_ns;  // process CPU time past which the decode stops
};

// A progressive JPEG makes the decoder pass over every coefficient once per scan, and a few bytes
// make a scan: a 7 KB file of thousands of scans costs seconds of CPU. Real photographs have a dozen
// (libjpeg's default script makes 10); past this many the image is damaged or an attack.
#define JPEG_MAX_SCANS 100
// Each decode's CPU in proportion to its pixels, with a floor for small images: a budget that a
// legitimate image never nears (a 24-megapixel JPEG decodes in about 0.2 s here) and that ends a
// crafted one long before the agent's deadline.
#define JPEG_CPU_FLOOR_NS 200000000ull
#define JPEG_CPU_NS_PER_PIXEL 40ull

static uint64_t cpu_now_ns(void) {
    struct timespec t;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0;
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

// libjpeg calls this as it works (per row of blocks in each pass): the scan limit and the CPU budget.
static void jpeg_watch(j_common_ptr common) {
    struct jpeg_failure *f = (struct jpeg_failure *)common->err;
    if (common->is_decompressor) {
        j_decompress_ptr info = (j_decompress_ptr)common;
        if (info->input_scan_number > JPEG_MAX_SCANS) {
            snprintf(f->message, sizeof f->message, "more than %d scans", JPEG_MAX_SCANS);
            longjmp(f->back, 1);
        }
    }
    if (f->cpu_deadline_ns && cpu_now_ns() > f->cpu_deadline_ns) {
        snprintf(f->message, sizeof f->message, "its decoding took more than the CPU it is allowed for its size");
        longjmp(f->back, 1);
    }
}

// The sample precision of a JPEG's frame (its first SOFn marker), or 0 when none is found. libjpeg
// here reads 8-bit JPEGs only; a 12- or 16-bit one is refused as a format it does not read.
static int jpeg_precision(const uint8_t *p, size_t n) {
    size_t at = 2;
    while (at + 4 <= n) {
        if (p[at] != 0xFF) return 0;
        uint8_t marker = p[at + 1];
        if (marker == 0xFF) {
            at++;
            continue;
        }
        size_t length = (size_t)p[at + 2] << 8 | p[at + 3];
        if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC)
            return at + 4 < n ? p[at + 4] : 0;
        if (marker == 0xDA || marker == 0xD9 || length < 2) return 0;
        at += 2 + length;
    }
    return 0;
}

// CMYK (Adobe's inverted form when `inverted`, as Photoshop and ImageMagick write it) to BGRA.
static void cmyk_to_bgra(uint8_t *row, uint32_t width, int inverted) {
    for (uint32_t x = 0; x < width; x++) {
        uint8_t *p = row + (size_t)x * 4;
        unsigned c = p[0], m = p[1], y = p[2], k = p[3];
        if (!inverted) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
        // Inverted values are the amount of each colour left: R = (255 - C)(255 - K) / 255.
        p[0] = (uint8_t)((y * k + 127) / 255), p[1] = (uint8_t)((m * k + 127) / 255);
        p[2] = (uint8_t)((c * k + 127) / 255), p[3] = 255;
    }
}

static void jpeg_failed(j_common_ptr info) {
    struct jpeg_failure *f = (struct jpeg_failure *)info->err;
    info->err->format_message(info, f->message);
    longjmp(f->back, 1);
}

static void jpeg_quiet(j_common_ptr info, int level) { (void)info, (void)level; }

// The orientation (1-8) an EXIF APP1 segment gives, else 1.
static int exif_orientation(const uint8_t *p, size_t n) {
    if (n < 14 || memcmp(p, "Exif\0\0", 6) != 0) return 1;
    p += 6, n -= 6;
    int little = p[0] == 'I' && p[1] == 'I';
    if (!little && !(p[0] == 'M' && p[1] == 'M')) return 1;
#define U16(q) (little ? (uint32_t)(q)[0] | (uint32_t)(q)[1] << 8 : (uint32_t)(q)[0] << 8 | (uint32_t)(q)[1])
#define U32(q) (little ? U16(q) | U16((q) + 2) << 16 : U16(q) << 16 | U16((q) + 2))
    uint32_t ifd = U32(p + 4);
    if (ifd > n || n - ifd < 2) return 1;
    uint32_t count = U16(p + ifd);
    for (uint32_t i = 0; i < count; i++) {
        size_t at = ifd + 2 + (size_t)i * 12;
        if (at + 12 > n) break;
        if (U16(p + at) == 0x0112 && U16(p + at + 2) == 3) {
            uint32_t value = U16(p + at + 8);
            return value >= 1 && value <= 8 ? (int)value : 1;
        }
    }
    return 1;
#undef U16
#undef U32
}

static outcome decode_jpeg(const uint8_t *data, size_t size, const struct decoder_request *rq, canvas *out,
                           uint32_t *ow, uint32_t *oh) {
    struct jpeg_decompress_struct info;
    struct jpeg_failure failure = {0};
    uint8_t *volatile buffer = NULL;
    JOCTET *volatile icc = NULL;
    colour_conv *volatile colours = NULL;  // the file's profile to sRGB, when it has one
    info.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = jpeg_failed;
    failure.manager.emit_message = jpeg_quiet;
#define JPEG_LET_GO() (jpeg_destroy_decompress(&info), free(buffer), free(icc), conv_free(colours))
    if (setjmp(failure.back)) {
        JPEG_LET_GO();
        canvas_drop(out);
        return fail(DECODER_FAILED, "JPEG: %s", failure.message);
    }
    int precision = jpeg_precision(data, size);
    if (precision != 0 && precision != 8)
        return fail(DECODER_NOT_AN_IMAGE, "a %d-bit JPEG (this decoder reads 8-bit JPEGs)", precision);
    jpeg_create_decompress(&info);
    failure.progress.progress_monitor = jpeg_watch;
    info.progress = &failure.progress;
    jpeg_mem_src(&info, data, (unsigned long)size);
    jpeg_save_markers(&info, JPEG_APP0 + 1, 0xFFFF);
    jpeg_save_markers(&info, JPEG_APP0 + 2, 0xFFFF);  // ICC_PROFILE, in pieces
    jpeg_read_header(&info, TRUE);
    int orientation = 1;
    for (jpeg_saved_marker_ptr m = info.marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && (orientation = exif_orientation(m->data, m->data_length)) != 1) break;
    uint32_t sw = info.image_width, sh = info.image_height;
    *ow = swaps(orientation) ? sh : sw, *oh = swaps(orientation) ? sw : sh;
    if ((uint64_t)sw * sh > rq->max_source_pixels) {
        jpeg_destroy_decompress(&info);
        return fail(DECODER_TOO_LARGE, "JPEG of %u x %u pixels is over the limit", sw, sh);
    }
    uint32_t tw, th;
    fit(*ow, *oh, rq->max_width, rq->max_height, &tw, &th);
    // The largest scale-down of the IDCT that still gives at least the box's pixels (stored sides).
    uint32_t need_w = swaps(orientation) ? th : tw, need_h = swaps(orientation) ? tw : th;
    unsigned denom = 1;
    while (denom < 8 && (sw + denom * 2 - 1) / (denom * 2) >= need_w && (sh + denom * 2 - 1) / (denom * 2) >= need_h)
        denom *= 2;
    info.scale_num = 1, info.scale_denom = denom;
    // CMYK and YCCK come out as CMYK, converted row by row below; everything else as BGRA.
    int cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
    info.out_color_space = cmyk ? JCS_CMYK : JCS_EXT_BGRA;
    // Memory and CPU in proportion to the image: a progressive JPEG keeps two bytes a coefficient
    // for every block (at most 4 components), and its passes are timed by `jpeg_watch`.
    info.mem->max_memory_to_use = (long)((uint64_t)sw * sh * 8 + (32ull << 20));
    failure.cpu_deadline_ns = cpu_now_ns() + JPEG_CPU_FLOOR_NS + (uint64_t)sw * sh * JPEG_CPU_NS_PER_PIXEL;
    jpeg_calc_output_dimensions(&info);
    uint64_t pixels = (uint64_t)info.output_width * info.output_height;
    if (pixels > rq->max_pixels) {
        jpeg_destroy_decompress(&info);
        return fail(DECODER_TOO_LARGE, "JPEG of %u x %u pixels (decoded at 1/%u) is over the limit of %llu", sw, sh,
                    denom, (unsigned long long)rq->max_pixels);
    }
    report.frames = 1;
    JOCTET *profile = NULL;
    unsigned int profile_size = 0;
    if (jpeg_read_icc_profile(&info, &profile, &profile_size)) icc = profile;
    colour_tag tag = {.icc = profile, .icc_size = profile_size};
    // CMYK profiles convert CMYK (Adobe's inverted form as written) to sRGB; RGB ones, in place.
    colours = colour_transform(&tag, cmyk ? (info.saw_Adobe_marker ? TYPE_CMYK_8_REV : TYPE_CMYK_8) : TYPE_BGRA_8,
                               TYPE_BGRA_8, rq);
    jpeg_start_decompress(&info);
    if (!cmyk && orientation == 1 && info.output_width == tw && info.output_height == th) {
        // The IDCT gave the size asked for, upright: strips of rows straight into the reply's pixels.
        uint8_t *rows = canvas_make(out, tw, th) == 0 ? canvas_strip(out) : NULL;
        if (!rows) {
            JPEG_LET_GO();
            canvas_drop(out);
            return fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
        }
        uint32_t per_strip = strip_rows(out);
        while (info.output_scanline < info.output_height) {
            uint32_t first = info.output_scanline, count = 0;
            while (count < per_strip && info.output_scanline < info.output_height) {
                JSAMPROW row = rows + (size_t)count * out->stride;
                count += jpeg_read_scanlines(&info, &row, 1);
            }
            if (colours) convert(colours, rows, rows, (size_t)count * tw);
            if (canvas_write(out, first, count, rows, out->stride) != 0)
                longjmp(failure.back, (snprintf(failure.message, sizeof failure.message, "%s", strerror(errno)), 1));
        }
        jpeg_finish_decompress(&info);
        JPEG_LET_GO();
        return (outcome){.status = DECODER_OK};  // opaque: premultiplied BGRA is the same bytes
    }
    size_t stride = (size_t)info.output_width * 4;
    buffer = malloc(stride * info.output_height);
    if (!buffer) longjmp(failure.back, (snprintf(failure.message, sizeof failure.message, "no memory"), 1));
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = buffer + info.output_scanline * stride;
        if (jpeg_read_scanlines(&info, &row, 1) != 1) continue;
        if (colours) {
            convert(colours, row, row, info.output_width);
            if (cmyk)  // the fourth byte was K: opaque now
                for (uint32_t x = 0; x < info.output_width; x++) row[(size_t)x * 4 + 3] = 255;
        } else if (cmyk) {
            cmyk_to_bgra(row, info.output_width, info.saw_Adobe_marker);
        }
    }
    jpeg_finish_decompress(&info);
    // Opaque: premultiplied BGRA is the same bytes.
    if (canvas_make(out, tw, th) != 0 ||
        resample(buffer, info.output_width, info.output_height, stride, orientation, out) != 0) {
        JPEG_LET_GO();
        canvas_drop(out);
        return fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
    }
    JPEG_LET_GO();
    return (outcome){.status = DECODER_OK};
#undef JPEG_LET_GO
}

// ---- WebP -----------------------------------------------------------------------------------------

// An animation's first frame, or a still image with a colour profile: straight RGBA of the whole
// canvas, then as every other format (`finish`).
static outcome decode_webp_rgba(const uint8_t *data, size_t size, WebPDemuxer *demux, int animated,
                                const colour_tag *tag, const struct decoder_request *rq, canvas *out, uint32_t *ow,
                                uint32_t *oh) {
    *ow = WebPDemuxGetI(demux, WEBP_FF_CANVAS_WIDTH), *oh = WebPDemuxGetI(demux, WEBP_FF_CANVAS_HEIGHT);
    outcome result = {.status = DECODER_OK};
    if (*ow == 0 || *oh == 0) return fail(DECODER_FAILED, "WebP: an empty canvas");
    if (too_large("WebP", *ow, *oh, rq, &result)) return result;
    rgba_image image = {.width = *ow, .height = *oh, .orientation = 1, .tag = *tag};
    size_t bytes = (size_t)*ow * *oh * 4;
    if (!(image.pixels = rgba_buffer(*ow, *oh, 0))) return fail(DECODER_TOO_LARGE, "no memory for the WebP's pixels");
    uint32_t wanted = frames_wanted(rq, report.frames);
    if (animated && frames_too_large("WebP", *ow, *oh, wanted, rq, &result)) {
        free(image.pixels);
        return result;
    }
    if (animated) {
        WebPData whole = {data, size};
        WebPAnimDecoderOptions options;
        WebPAnimDecoderOptionsInit(&options);
        options.color_mode = MODE_RGBA, options.use_threads = 0;
        WebPAnimDecoder *frames = WebPAnimDecoderNew(&whole, &options);
        WebPAnimInfo about;
        uint8_t *frame = NULL;
        int timestamp = 0, before = 0;
        if (!frames || !WebPAnimDecoderGetInfo(frames, &about) || !WebPAnimDecoderGetNext(frames, &frame, &timestamp)) {
            result = fail(DECODER_FAILED, "WebP: the animation's first frame could not be decoded");
        } else if (wanted == 1) {
            memcpy(image.pixels, frame, bytes);
        } else {
            // Every frame (each a whole canvas, composed by libwebp) through `prepare`, into the reply.
            uint32_t tw, th;
            fit(*ow, *oh, rq->max_width, rq->max_height, &tw, &th);
            timing.loops = about.loop_count;
            if (canvas_make_frames(out, tw, th) != 0)
                result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
            for (uint32_t k = 0; result.status == DECODER_OK && k < wanted; k++) {
                if (k > 0 && !WebPAnimDecoderGetNext(frames, &frame, &timestamp)) break;  // a damaged tail
                memcpy(image.pixels, frame, bytes);
                prepare(&image, rq);
                if (canvas_add_frame(out, image.pixels, *ow, *oh, (size_t)*ow * 4) != 0)
                    result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
                timing.durations[k] = shown_duration((uint32_t)(timestamp - before));
                before = timestamp;
            }
            WebPAnimDecoderDelete(frames);
            free(image.pixels);
            if (result.status != DECODER_OK) canvas_drop(out);
            return result;
        }
        WebPAnimDecoderDelete(frames);
    } else if (!WebPDecodeRGBAInto(data, size, image.pixels, bytes, (int)*ow * 4)) {
        result = fail(DECODER_FAILED, "WebP: decoding stopped");
    }
    if (result.status == DECODER_OK) return finish(&image, rq, out);
    free(image.pixels);
    return result;
}

static outcome decode_webp(const uint8_t *data, size_t size, const struct decoder_request *rq, canvas *out,
                           uint32_t *ow, uint32_t *oh) {
    WebPData whole = {data, size};
    WebPDemuxer *demux = WebPDemux(&whole);
    if (!demux) return fail(DECODER_FAILED, "WebP: not a WebP image this decoder reads");
    uint32_t flags = WebPDemuxGetI(demux, WEBP_FF_FORMAT_FLAGS);
    uint32_t frames = WebPDemuxGetI(demux, WEBP_FF_FRAME_COUNT);
    report.frames = frames ? frames : 1;
    WebPChunkIterator profile;
    colour_tag tag = {0};
    int has_profile = (flags & ICCP_FLAG) && WebPDemuxGetChunk(demux, "ICCP", 1, &profile);
    if (has_profile) tag.icc = profile.chunk.bytes, tag.icc_size = profile.chunk.size;
    if ((flags & ANIMATION_FLAG) || has_profile) {
        outcome result = decode_webp_rgba(data, size, demux, flags & ANIMATION_FLAG, &tag, rq, out, ow, oh);
        if (has_profile) WebPDemuxReleaseChunkIterator(&profile);
        WebPDemuxDelete(demux);
        return result;
    }
    WebPDemuxDelete(demux);
    // A still image without a profile: scaled by the decoder itself, straight into the reply.
    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config)) return fail(DECODER_FAILED, "WebP: a library of another version");
    if (WebPGetFeatures(data, size, &config.input) != VP8_STATUS_OK)
        return fail(DECODER_FAILED, "WebP: not a WebP image this decoder reads");
    *ow = (uint32_t)config.input.width, *oh = (uint32_t)config.input.height;
    if ((uint64_t)*ow * *oh > rq->max_source_pixels)
        return fail(DECODER_TOO_LARGE, "WebP of %u x %u pixels is over the limit", *ow, *oh);
    uint32_t tw, th;
    fit(*ow, *oh, rq->max_width, rq->max_height, &tw, &th);
    if ((uint64_t)tw * th > rq->max_pixels)
        return fail(DECODER_TOO_LARGE, "WebP at %u x %u pixels is over the limit of %llu", tw, th,
                    (unsigned long long)rq->max_pixels);
    uint8_t *pixels = canvas_make(out, tw, th) == 0 ? canvas_whole(out) : NULL;
    if (!pixels) {
        canvas_drop(out);
        return fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
    }
    if (tw != *ow || th != *oh) {
        config.options.use_scaling = 1;
        config.options.scaled_width = (int)tw;
        config.options.scaled_height = (int)th;
    }
    config.output.colorspace = MODE_bgrA;  // premultiplied
    config.output.is_external_memory = 1;
    config.output.u.RGBA.rgba = pixels;
    config.output.u.RGBA.stride = (int)out->stride;
    config.output.u.RGBA.size = out->size;
    VP8StatusCode status = WebPDecode(data, size, &config);
    WebPFreeDecBuffer(&config.output);
    if (status != VP8_STATUS_OK) {
        canvas_drop(out);
        return fail(DECODER_FAILED, "WebP: decoding stopped (status %d)", (int)status);
    }
    return (outcome){.status = DECODER_OK};
}

// ---- GIF ------------------------------------------------------------------------------------------

struct gif_input {
    const uint8_t *data;
    size_t size, at;
};

// The frames after the one just read, their compressed data skipped, not decoded (a damaged rest
// ends the count).
static uint32_t gif_frames_after(GifFileType *gif) {
    uint32_t frames = 0;
    GifRecordType type;
    while (frames < (1u << 20) && DGifGetRecordType(gif, &type) != GIF_ERROR && type != TERMINATE_RECORD_TYPE) {
        int code;
        GifByteType *block;
        if (type == EXTENSION_RECORD_TYPE) {
            if (DGifGetExtension(gif, &code, &block) == GIF_ERROR) break;
            while (block && DGifGetExtensionNext(gif, &block) != GIF_ERROR) {}
            if (block) break;
        } else if (type == IMAGE_DESC_RECORD_TYPE) {
            if (DGifGetImageDesc(gif) == GIF_ERROR || DGifGetCode(gif, &code, &block) == GIF_ERROR) break;
            while (block && DGifGetCodeNext(gif, &block) != GIF_ERROR) {}
            if (block) break;
            frames++;
        }
    }
    return frames;
}

static int gif_read(GifFileType *gif, GifByteType *into, int wanted) {
    struct gif_input *in = gif->UserData;
    size_t n = wanted < 0 ? 0 : (size_t)wanted;
    if (n > in->size - in->at) n = in->size - in->at;
    memcpy(into, in->data + in->at, n);
    in->at += n;
    return (int)n;
}

// The first frame, on the logical screen (what is not covered is transparent), with the
// transparent colour its Graphic Control Extension names; an animation's other frames are not read.
// The frames a GIF holds, counted without decoding them (each frame's compressed data skipped).
static uint32_t gif_frame_count(const uint8_t *data, size_t size) {
    struct gif_input in = {data, size, 0};
    int error = 0;
    GifFileType *gif = DGifOpen(&in, gif_read, &error);
    if (!gif) return 0;
    uint32_t frames = gif_frames_after(gif);
    DGifCloseFile(gif, &error);
    return frames;
}

static outcome decode_gif(const uint8_t *data, size_t size, const struct decoder_request *rq, canvas *out,
                          uint32_t *ow, uint32_t *oh) {
    uint32_t frames = gif_frame_count(data, size);
    struct gif_input in = {data, size, 0};
    int error = 0;
    GifFileType *gif = DGifOpen(&in, gif_read, &error);
    if (!gif) return fail(DECODER_FAILED, "GIF: %s", GifErrorString(error));
    outcome result = {.status = DECODER_OK};
    uint8_t *screen = NULL, *previous = NULL;
    GifByteType *line = NULL;
    *ow = (uint32_t)gif->SWidth, *oh = (uint32_t)gif->SHeight;
    report.frames = frames ? frames : 1;
    uint32_t wanted = frames_wanted(rq, frames), sent = 0;
    if (*ow == 0 || *oh == 0) {
        result = fail(DECODER_FAILED, "GIF: an empty logical screen");
        goto done;
    }
    if (too_large("GIF", *ow, *oh, rq, &result) || frames_too_large("GIF", *ow, *oh, wanted, rq, &result)) goto done;
    screen = calloc((size_t)*ow * *oh, 4);  // transparent where no frame reaches
    if (!screen) {
        result = fail(DECODER_TOO_LARGE, "no memory for the GIF's pixels");
        goto done;
    }
    uint32_t tw, th;
    fit(*ow, *oh, rq->max_width, rq->max_height, &tw, &th);
    if ((wanted > 1 ? canvas_make_frames(out, tw, th) : canvas_make(out, tw, th)) != 0) {
        result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
        goto done;
    }
    // Each frame is drawn over what the one before left (its disposal), and the screen is the
    // frame shown: what browsers do.
    int transparent = -1, disposal = 0;
    uint32_t delay = 0;
    timing.loops = 1;  // played once, unless the NETSCAPE2.0 extension says it repeats
    for (;;) {
        GifRecordType type;
        if (DGifGetRecordType(gif, &type) == GIF_ERROR) break;
        if (type == TERMINATE_RECORD_TYPE) break;
        if (type == EXTENSION_RECORD_TYPE) {
            int code;
            GifByteType *ext;
            if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) break;
            GraphicsControlBlock gcb;
            if (code == GRAPHICS_EXT_FUNC_CODE && ext && DGifExtensionToGCB(ext[0], ext + 1, &gcb) == GIF_OK)
                transparent = gcb.TransparentColor, disposal = gcb.DisposalMode, delay = (uint32_t)gcb.DelayTime * 10;
            int netscape = code == APPLICATION_EXT_FUNC_CODE && ext && ext[0] >= 11 && memcmp(ext + 1, "NETSCAPE2.0", 11) == 0;
            while (ext) {
                if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) goto decoded;
                if (netscape && ext && ext[0] >= 3 && ext[1] == 1) {  // repetitions after the first play; 0: for ever
                    uint32_t repeats = (uint32_t)ext[2] | (uint32_t)ext[3] << 8;
                    timing.loops = repeats ? repeats + 1 : 0;
                }
            }
            continue;
        }
        if (type != IMAGE_DESC_RECORD_TYPE) continue;
        if (DGifGetImageDesc(gif) == GIF_ERROR) break;
        const ColorMapObject *map = gif->Image.ColorMap ? gif->Image.ColorMap : gif->SColorMap;
        int left = gif->Image.Left, top = gif->Image.Top, width = gif->Image.Width, height = gif->Image.Height;
        if (!map || width <= 0 || height <= 0 || width > 65535 || height > 65535) {
            if (sent == 0) result = fail(DECODER_FAILED, "GIF: a frame without colours or size");
            break;
        }
        free(line);
        if (!(line = malloc((size_t)width))) {
            result = fail(DECODER_TOO_LARGE, "no memory for the GIF's pixels");
            goto done;
        }
        if (disposal == DISPOSE_PREVIOUS && wanted > 1) {
            if (!previous && !(previous = malloc((size_t)*ow * *oh * 4))) {
                result = fail(DECODER_TOO_LARGE, "no memory for the GIF's pixels");
                goto done;
            }
            memcpy(previous, screen, (size_t)*ow * *oh * 4);
        }
        // Interlaced frames come in four passes of rows.
        static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
        int passes = gif->Image.Interlace ? 4 : 1, cut = 0;
        for (int pass = 0; pass < passes && !cut; pass++) {
            for (int row = passes == 1 ? 0 : start[pass]; row < height; row += passes == 1 ? 1 : step[pass]) {
                if (DGifGetLine(gif, line, width) == GIF_ERROR) {
                    cut = 1;
                    break;
                }
                int y = top + row;
                if (y < 0 || (uint32_t)y >= *oh) continue;
                for (int x = 0; x < width; x++) {
                    int sx = left + x, index = line[x];
                    if (sx < 0 || (uint32_t)sx >= *ow || index == transparent || index >= map->ColorCount) continue;
                    uint8_t *p = screen + ((size_t)y * *ow + (size_t)sx) * 4;
                    const GifColorType *c = &map->Colors[index];
                    p[0] = c->Blue, p[1] = c->Green, p[2] = c->Red, p[3] = 255;
                }
            }
        }
        if (cut && sent == 0 && wanted == 1) {
            result = fail(DECODER_FAILED, "GIF: %s", GifErrorString(gif->Error));
            goto done;
        }
        if (cut && sent > 0) break;  // a damaged tail: the frames before it
        if (wanted == 1) {
            if (resample(screen, *ow, *oh, (size_t)*ow * 4, 1, out) != 0) {
                result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
                goto done;
            }
            sent = 1;
            goto done;  // a still image, or the first frame asked
        }
        if (canvas_add_frame(out, screen, *ow, *oh, (size_t)*ow * 4) != 0) {
            result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
            goto done;
        }
        timing.durations[sent++] = shown_duration(delay);
        if (sent == wanted) break;
        // What the frame leaves for the next: the background (transparent) where it was, or what
        // was there before it.
        if (disposal == DISPOSE_BACKGROUND) {
            for (int row = 0; row < height; row++) {
                int y = top + row;
                if (y < 0 || (uint32_t)y >= *oh) continue;
                int x0 = left < 0 ? 0 : left, x1 = left + width > (int)*ow ? (int)*ow : left + width;
                if (x1 > x0) memset(screen + ((size_t)y * *ow + (size_t)x0) * 4, 0, (size_t)(x1 - x0) * 4);
            }
        } else if (disposal == DISPOSE_PREVIOUS && previous) {
            memcpy(screen, previous, (size_t)*ow * *oh * 4);
        }
        transparent = -1, disposal = 0, delay = 0;
    }
decoded:
    if (sent == 0 && result.status == DECODER_OK) result = fail(DECODER_FAILED, "GIF: no image in it");
done:
    if (result.status != DECODER_OK) canvas_drop(out);
    free(screen);
    free(previous);
    free(line);
    DGifCloseFile(gif, &error);
    return result;
}

// ---- SVG ------------------------------------------------------------------------------------------

// librsvg, in the SVG decoder alone (`--svg`): it brings GLib, cairo, Pango and FreeType, which no
// raster decode should pay for. Loaded with dlopen before the lock (its soname is the same in
// Debian 12 and 13); where it is not installed, SVG is not read, and the reply says so.
#define SVG_SONAME "librsvg-2.so.2"
#define SVG_FUNCTIONS(X)                                                                                       \
    X(rsvg_handle_new_from_data) X(rsvg_handle_get_intrinsic_size_in_pixels) X(rsvg_handle_get_intrinsic_dimensions) \
    X(rsvg_handle_render_document) X(g_object_unref) X(g_error_free) X(cairo_image_surface_create_for_data)     \
    X(cairo_create) X(cairo_destroy) X(cairo_surface_destroy) X(cairo_surface_flush)
#define POINTER(name) static __typeof__(name) *svg_##name;
SVG_FUNCTIONS(POINTER)
#undef POINTER
static int svg_mode, have_svg;

// The libraries, and the fonts text falls back to, set up before the lock: fontconfig reads the
// system's configuration alone (no HOME: no fonts but /usr's), and a first drawing of each generic
// family opens its font, which stays open for the SVGs that use it (no file opens after the lock).
static void load_svg(void) {
    void *library = dlopen(SVG_SONAME, RTLD_NOW | RTLD_LOCAL);
    have_svg = library != NULL;
#define FIND(name) \
    if (have_svg && !(svg_##name = (__typeof__(name) *)dlsym(library, #name))) have_svg = 0;
    SVG_FUNCTIONS(FIND)
#undef FIND
    if (!have_svg) return;
    unsetenv("HOME"), unsetenv("XDG_CONFIG_HOME"), unsetenv("XDG_DATA_HOME"), unsetenv("XDG_CACHE_HOME");
    static const char warm[] =
        "<svg xmlns='http://www.w3.org/2000/svg' width='64' height='16'>"
        "<text y='12' font-family='sans-serif'>Aa</text><text y='12' font-family='serif'>Aa</text>"
        "<text y='12' font-family='monospace'>Aa</text></svg>";
    RsvgHandle *handle = svg_rsvg_handle_new_from_data((const guint8 *)warm, sizeof warm - 1, NULL);
    if (!handle) return;
    static uint8_t pixels[64 * 16 * 4];
    cairo_surface_t *surface = svg_cairo_image_surface_create_for_data(pixels, CAIRO_FORMAT_ARGB32, 64, 16, 64 * 4);
    cairo_t *cr = svg_cairo_create(surface);
    RsvgRectangle viewport = {0, 0, 64, 16};
    svg_rsvg_handle_render_document(handle, cr, &viewport, NULL);
    svg_cairo_destroy(cr);
    svg_cairo_surface_destroy(surface);
    svg_g_object_unref(handle);
}

// An SVG drawn at the box (vectors are scaled up as well as down), or at its own size: its width
// and height, else its viewBox's, else 256 x 256. No external reference is loaded (the document
// comes without a base), and scripts never run (librsvg has none).
static outcome decode_svg(const uint8_t *data, size_t size, const struct decoder_request *rq, canvas *out,
                          uint32_t *ow, uint32_t *oh) {
    if (!have_svg) return fail(DECODER_NOT_AN_IMAGE, "SVG: not read here (%s is not installed)", SVG_SONAME);
    GError *error = NULL;
    RsvgHandle *handle = svg_rsvg_handle_new_from_data(data, size, &error);
    if (!handle) {
        outcome o = fail(DECODER_FAILED, "SVG: %s", error ? error->message : "not an SVG document");
        if (error) svg_g_error_free(error);
        return o;
    }
    outcome result = {.status = DECODER_OK};
    double w = 0, h = 0;
    if (!svg_rsvg_handle_get_intrinsic_size_in_pixels(handle, &w, &h) || !(w > 0) || !(h > 0)) {
        gboolean has_box = FALSE;
        RsvgRectangle box = {0};
        svg_rsvg_handle_get_intrinsic_dimensions(handle, NULL, NULL, NULL, NULL, &has_box, &box);
        w = has_box && box.width > 0 ? box.width : 256, h = has_box && box.height > 0 ? box.height : 256;
    }
    // Its own size, rounded up, at least a pixel and at most what a side may be.
    w = w < 1 ? 1 : w > 1e6 ? 1e6 : w, h = h < 1 ? 1 : h > 1e6 ? 1e6 : h;
    *ow = (uint32_t)ceil(w), *oh = (uint32_t)ceil(h);
    double scale = 1;
    if (rq->max_width || rq->max_height) {
        double sx = rq->max_width ? rq->max_width / w : 1e9, sy = rq->max_height ? rq->max_height / h : 1e9;
        scale = sx < sy ? sx : sy;
    }
    uint32_t tw = (uint32_t)fmax(1, round(w * scale)), th = (uint32_t)fmax(1, round(h * scale));
    if (rq->max_width && tw > rq->max_width) tw = rq->max_width;
    if (rq->max_height && th > rq->max_height) th = rq->max_height;
    uint8_t *pixels = NULL;
    if ((uint64_t)tw * th > rq->max_pixels) {
        result = fail(DECODER_TOO_LARGE, "SVG at %u x %u pixels is over the limit of %llu", tw, th,
                      (unsigned long long)rq->max_pixels);
    } else if (canvas_make(out, tw, th) != 0 || !(pixels = canvas_whole(out))) {
        result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
    } else {
        memset(pixels, 0, out->size);  // transparent where nothing is drawn
        // CAIRO_FORMAT_ARGB32 is premultiplied B, G, R, A in memory on little-endian: the reply's format.
        cairo_surface_t *surface =
            svg_cairo_image_surface_create_for_data(pixels, CAIRO_FORMAT_ARGB32, (int)tw, (int)th, (int)out->stride);
        cairo_t *cr = svg_cairo_create(surface);
        RsvgRectangle viewport = {0, 0, tw, th};
        if (!svg_rsvg_handle_render_document(handle, cr, &viewport, &error))
            result = fail(DECODER_FAILED, "SVG: %s", error ? error->message : "it could not be drawn");
        svg_cairo_destroy(cr);
        svg_cairo_surface_flush(surface);
        svg_cairo_surface_destroy(surface);
        if (error) svg_g_error_free(error);
    }
    if (result.status != DECODER_OK) canvas_drop(out);
    svg_g_object_unref(handle);
    report.frames = 1;
    return result;
}

// ---- requests -------------------------------------------------------------------------------------

static outcome decode(const uint8_t *data, size_t size, const struct decoder_request *rq, canvas *out,
                      uint32_t *ow, uint32_t *oh) {
    // The agent sends SVG (sniffed as it sniffs every image) to the SVG decoder, the rest here.
    if (svg_mode) return decode_svg(data, size, rq, out, ow, oh);
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (size >= 8 && memcmp(data, png, 8) == 0) return decode_png(data, size, rq, out, ow, oh);
    if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return decode_jpeg(data, size, rq, out, ow, oh);
    if (size >= 12 && memcmp(data, "RIFF", 4) == 0 && memcmp(data + 8, "WEBP", 4) == 0)
        return decode_webp(data, size, rq, out, ow, oh);
    if (size >= 6 && (memcmp(data, "GIF87a", 6) == 0 || memcmp(data, "GIF89a", 6) == 0))
        return decode_gif(data, size, rq, out, ow, oh);
    // ISO base media files name their brand in the "ftyp" box: AVIF's, or HEIF's (HEIC and the rest).
    if (size >= 12 && memcmp(data + 4, "ftyp", 4) == 0) {
        if (memcmp(data + 8, "avif", 4) == 0 || memcmp(data + 8, "avis", 4) == 0) {
            if (!have_avif) return fail(DECODER_NOT_AN_IMAGE, "AVIF: not read here (%s is not installed)", AVIF_SONAME);
            return decode_avif(data, size, rq, out, ow, oh);
        }
        enum heif_filetype_result type = heif_check_filetype(data, (int)(size < 64 ? size : 64));
        if (type == heif_filetype_yes_supported) return decode_heif(data, size, rq, out, ow, oh);
    }
    static const uint8_t jxl_box[12] = {0, 0, 0, 0x0C, 'J', 'X', 'L', ' ', 0x0D, 0x0A, 0x87, 0x0A};
    if ((size >= 2 && data[0] == 0xFF && data[1] == 0x0A) || (size >= 12 && memcmp(data, jxl_box, 12) == 0)) {
        if (!have_jxl) return fail(DECODER_NOT_AN_IMAGE, "JPEG XL: not read here (%s is not installed)", JXL_SONAME);
        return decode_jxl(data, size, rq, out, ow, oh);
    }
    return fail(DECODER_NOT_AN_IMAGE, "not a PNG, JPEG, WebP, GIF, AVIF, HEIF or JPEG XL image (SVG goes to the SVG decoder)");
}

static void reply(int sock, struct decoder_reply *r, int fd) {
    // An animation's durations follow the reply in the same message.
    static uint8_t message[sizeof(struct decoder_reply) + sizeof timing.durations];
    size_t extra = r->frames_sent > 1 ? (size_t)r->frames_sent * sizeof(uint32_t) : 0;
    memcpy(message, r, sizeof *r);
    memcpy(message + sizeof *r, timing.durations, extra);
    if (decoder_send(sock, message, sizeof *r + extra, fd, 0) < 0) _exit(0);  // the agent is gone
}

static void serve(int sock) {
    for (;;) {
        struct decoder_request rq = {0};
        int input;
        ssize_t n = decoder_receive(sock, &rq, sizeof rq, &input, 0);
        if (n == 0) return;  // the agent closed its end: an idle decoder's end
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EMSGSIZE) return;
        struct decoder_reply r = {.magic = DECODER_REPLY_MAGIC, .id = rq.id};
        canvas out = {.fd = -1};
        struct stat st;
        uint8_t *data = MAP_FAILED;
        outcome o;
        if ((size_t)n != sizeof rq || rq.magic != DECODER_REQUEST_MAGIC || rq.version != DECODER_PROTOCOL_VERSION || input < 0) {
            o = n < 0 ? fail(DECODER_BAD_REQUEST, "a request longer than %zu bytes", sizeof rq)
                      : fail(DECODER_BAD_REQUEST, "a request of %zd bytes, version %u, %s a file", n,
                             (size_t)n >= 8 ? rq.version : 0, input < 0 ? "without" : "with");
        } else if (fstat(input, &st) != 0 || st.st_size <= 0) {
            o = fail(DECODER_NOT_AN_IMAGE, "the image file is empty");
        } else if ((data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, input, 0)) == MAP_FAILED) {
            o = fail(DECODER_FAILED, "the image file cannot be mapped: %s", strerror(errno));
        } else {
            uint32_t ow = 0, oh = 0;
            report.profile = DECODER_PROFILE_NONE, report.space = DECODER_SPACE_SRGB, report.frames = 1;
            timing.loops = 0;
            o = decode(data, (size_t)st.st_size, &rq, &out, &ow, &oh);
            r.original_width = ow, r.original_height = oh;
            if (o.status == DECODER_OK && canvas_seal(&out) != 0)
                o = fail(DECODER_FAILED, "the pixels could not be sealed: %s", strerror(errno));
        }
        if (data != MAP_FAILED) munmap(data, (size_t)st.st_size);
        if (input >= 0) close(input);
        r.status = o.status;
        memcpy(r.message, o.message, sizeof r.message);
        if (o.status == DECODER_OK) {
            r.width = out.width, r.height = out.height, r.stride = out.stride;
            r.format = DECODER_FORMAT_B8G8R8A8_PREMULTIPLIED;
            r.color_profile = report.profile, r.color_space = report.space, r.frames = report.frames;
            r.frames_sent = out.frames, r.loop_count = out.frames > 1 ? timing.loops : 0;
        }
        reply(sock, &r, o.status == DECODER_OK ? out.fd : -1);
        canvas_drop(&out);
    }
}

// ---- the sandbox ----------------------------------------------------------------------------------

// What the decoder may ask of the kernel once its libraries are loaded: its socket, memory, its
// memfds, and leaving. Everything else fails with EPERM (no open, socket, connect, execve, ptrace...).
static const int allowed[] = {
    SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(pwrite64), SCMP_SYS(recvmsg), SCMP_SYS(sendmsg), SCMP_SYS(close),
    SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(lseek), SCMP_SYS(mmap), SCMP_SYS(munmap),
    SCMP_SYS(mremap), SCMP_SYS(mprotect), SCMP_SYS(brk), SCMP_SYS(madvise), SCMP_SYS(memfd_create),
    SCMP_SYS(ftruncate), SCMP_SYS(fcntl), SCMP_SYS(futex), SCMP_SYS(clock_gettime), SCMP_SYS(getrandom),
    SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigprocmask), SCMP_SYS(exit), SCMP_SYS(exit_group),
    // A thread's own set-up: libheif's HEVC decoder (libde265) always starts one worker thread.
    SCMP_SYS(set_robust_list), SCMP_SYS(rseq), SCMP_SYS(sched_yield),
};

struct sandbox { int no_new_privs, network_namespace, seccomp; };

static struct sandbox lock_in(void) {
    struct sandbox s = {0};
    // Memory for one large image and its decoder, and CPU for many: a request that would take more
    // ends the process (the agent times each request out long before, and starts another decoder).
    // (No process limit: a new process is the filter's to refuse, and RLIMIT_NPROC would refuse
    // the one thread HEIF needs as well.)
    struct rlimit as = {2ul << 30, 2ul << 30}, cpu = {120, 120};
    setrlimit(RLIMIT_AS, &as);
    setrlimit(RLIMIT_CPU, &cpu);
    s.no_new_privs = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
    // No network where the kernel lets an unprivileged process have a namespace of its own.
    s.network_namespace = unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0 || unshare(CLONE_NEWNET) == 0;
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (ctx) {
        int ok = 1;
        for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++)
            ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0) == 0;
        // Threads, never processes: clone only with CLONE_THREAD (its flags are an argument the
        // filter can read); clone3, whose flags it cannot, says it does not exist, so libc falls
        // back to clone.
        ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                                    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD)) == 0;
        ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) == 0;
        s.seccomp = ok && seccomp_load(ctx) == 0;
        seccomp_release(ctx);
    }
    return s;
}

static const char *outcome_of(long rc) {
    if (rc >= 0) return "allowed";
    return errno == EPERM ? "EPERM" : strerrorname_np(errno);
}

int main(int argc, char **argv) {
    // Nothing but the socket and the standard streams is kept from the agent.
    close_range(3, ~0u, 0);
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("netactivity-decoder protocol %u\n", DECODER_PROTOCOL_VERSION);
        return 0;
    }
    int test = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--test-sandbox") == 0) test = 1;
        else if (strcmp(argv[i], "--svg") == 0) svg_mode = 1;
        else {
            fprintf(stderr, "usage: netactivity-decoder [--svg] [--test-sandbox | --version]\n");
            return 64;
        }
    }
    // The libraries are linked in and resolved at start, and set up before the lock: libheif loads
    // its codec plugins now (nothing is loaded after), lcms2 makes the sRGB profile, the libraries
    // loaded by name are loaded (librsvg in the SVG decoder alone).
    heif_init(NULL);
    srgb = cmsCreate_sRGBProfile();
    fast_tables();
    load_optional_libraries();
    if (svg_mode) load_svg();
    struct sandbox s = lock_in();
    if (!s.no_new_privs || !s.seccomp) {
        fprintf(stderr, "netactivity-decoder: the sandbox could not be set up (no_new_privs %d, seccomp %d)\n",
                s.no_new_privs, s.seccomp);
        return 70;
    }
    if (test) {
        // Each forbidden call, made directly (no libc fallback in between); EPERM is the filter's answer.
        printf("no_new_privs %d\n", s.no_new_privs);
        printf("network_namespace %d\n", s.network_namespace);
        printf("openat %s\n", outcome_of(syscall(SYS_openat, AT_FDCWD, "/etc/passwd", O_RDONLY)));
        printf("socket %s\n", outcome_of(syscall(SYS_socket, AF_INET, SOCK_STREAM, 0)));
        printf("connect %s\n", outcome_of(syscall(SYS_connect, 0, NULL, 0)));
        char *args[] = {"/bin/true", NULL};
        printf("execve %s\n", outcome_of(syscall(SYS_execve, "/bin/true", args, NULL)));
        // A new process (fork's clone, without CLONE_THREAD): refused, so it never runs.
        printf("fork %s\n", outcome_of(syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0)));
        printf("memfd_create %s\n", outcome_of(syscall(SYS_memfd_create, "probe", 0)));
        fflush(stdout);
        return 0;
    }
    // Locked in: the agent hears it before anything is asked (a decoder that ends before this line
    // never started, which tells the agent its bubblewrap does not work here).
    struct decoder_reply ready = {.magic = DECODER_REPLY_MAGIC, .status = DECODER_READY};
    snprintf(ready.message, sizeof ready.message,
             "no_new_privs %d, network_namespace %d, seccomp %d, avif %d, jxl %d, svg %d", s.no_new_privs,
             s.network_namespace, s.seccomp, have_avif, have_jxl, svg_mode && have_svg);
    reply(0, &ready, -1);
    serve(0);
    return 0;
}
