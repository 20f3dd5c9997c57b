// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// netactivity-decoder: decodes images for netactivityd, in a sandbox of its own.
//
// Image decoders are the classic way in for bytes from the network (libwebp's CVE-2023-4863 was
// exploited in the wild), so they never run in the agent. This process is started by the agent with
// one SOCK_SEQPACKET socket as its standard input, loads its libraries, and then locks itself in
// before it reads anything: no new privileges, a network namespace of its own where the kernel lets
// it make one, an address-space and a CPU-time limit, and a seccomp allow-list with no open, socket,
// connect or execve. Each request is one message with a sealed memfd of encoded bytes; each reply
// one message with a sealed memfd of pixels (B8G8R8A8, premultiplied, rows 4-byte aligned: what
// GTK 4, cairo and Qt take as they are on little-endian), or a status saying why not.
//
// Formats: PNG (libspng), JPEG (libjpeg-turbo, with its scaled IDCT when a smaller box is asked, and
// the EXIF orientation applied; CMYK and YCCK converted; at most 100 scans, and CPU and memory in
// proportion to its pixels; 12-bit JPEGs are refused as a format it does not read), WebP (libwebp, scaled by the decoder itself; animations are
// refused), GIF (giflib: the first frame on its logical screen). Colour profiles are not applied:
// the pixels are the file's own values, which desktops take as sRGB.
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
#include <errno.h>
#include <fcntl.h>
#include <gif_lib.h>
#include <stdio.h>  // before jpeglib.h, which uses FILE
#include <jpeglib.h>
#include <sched.h>
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

#include "decoder_protocol.h"

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
    uint32_t width, height, stride;
    size_t size;
    uint8_t *whole;  // canvas_whole's buffer, written at the seal
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
    c->fd = memfd_create("netactivity-pixels", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    return c->fd < 0 ? -1 : 0;
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
        ssize_t n = pwrite(c->fd, data + done, length - done, (off_t)((size_t)y * c->stride + done));
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

// ---- PNG ------------------------------------------------------------------------------------------

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
    // RGBA, straight alpha -> BGRA, premultiplied, in place.
    for (size_t i = 0; i < length; i += 4) {
        uint8_t r = rgba[i], g = rgba[i + 1], b = rgba[i + 2], a = rgba[i + 3];
        rgba[i] = (uint8_t)((b * a + 127) / 255);
        rgba[i + 1] = (uint8_t)((g * a + 127) / 255);
        rgba[i + 2] = (uint8_t)((r * a + 127) / 255);
    }
    uint32_t tw, th;
    fit(ihdr.width, ihdr.height, rq->max_width, rq->max_height, &tw, &th);
    if (canvas_make(out, tw, th) != 0 || resample(rgba, ihdr.width, ihdr.height, (size_t)ihdr.width * 4, 1, out) != 0) {
        result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
        goto done;
    }
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
    info.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = jpeg_failed;
    failure.manager.emit_message = jpeg_quiet;
    if (setjmp(failure.back)) {
        jpeg_destroy_decompress(&info);
        free(buffer);
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
    jpeg_start_decompress(&info);
    if (!cmyk && orientation == 1 && info.output_width == tw && info.output_height == th) {
        // The IDCT gave the size asked for, upright: strips of rows straight into the reply's pixels.
        uint8_t *rows = canvas_make(out, tw, th) == 0 ? canvas_strip(out) : NULL;
        if (!rows) {
            jpeg_destroy_decompress(&info);
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
            if (canvas_write(out, first, count, rows, out->stride) != 0)
                longjmp(failure.back, (snprintf(failure.message, sizeof failure.message, "%s", strerror(errno)), 1));
        }
        jpeg_finish_decompress(&info);
        jpeg_destroy_decompress(&info);
        return (outcome){.status = DECODER_OK};  // opaque: premultiplied BGRA is the same bytes
    }
    size_t stride = (size_t)info.output_width * 4;
    buffer = malloc(stride * info.output_height);
    if (!buffer) longjmp(failure.back, (snprintf(failure.message, sizeof failure.message, "no memory"), 1));
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = buffer + info.output_scanline * stride;
        if (jpeg_read_scanlines(&info, &row, 1) == 1 && cmyk) cmyk_to_bgra(row, info.output_width, info.saw_Adobe_marker);
    }
    jpeg_finish_decompress(&info);
    // Opaque: premultiplied BGRA is the same bytes.
    if (canvas_make(out, tw, th) != 0 ||
        resample(buffer, info.output_width, info.output_height, stride, orientation, out) != 0) {
        jpeg_destroy_decompress(&info);
        free(buffer);
        canvas_drop(out);
        return fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
    }
    jpeg_destroy_decompress(&info);
    free(buffer);
    return (outcome){.status = DECODER_OK};
}

// ---- WebP -----------------------------------------------------------------------------------------

static outcome decode_webp(const uint8_t *data, size_t size, const struct decoder_request *rq, canvas *out,
                           uint32_t *ow, uint32_t *oh) {
    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config)) return fail(DECODER_FAILED, "WebP: a library of another version");
    if (WebPGetFeatures(data, size, &config.input) != VP8_STATUS_OK)
        return fail(DECODER_FAILED, "WebP: not a WebP image this decoder reads");
    if (config.input.has_animation) return fail(DECODER_FAILED, "WebP: animations are not decoded");
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
static outcome decode_gif(const uint8_t *data, size_t size, const struct decoder_request *rq, canvas *out,
                          uint32_t *ow, uint32_t *oh) {
    struct gif_input in = {data, size, 0};
    int error = 0;
    GifFileType *gif = DGifOpen(&in, gif_read, &error);
    if (!gif) return fail(DECODER_FAILED, "GIF: %s", GifErrorString(error));
    outcome result = {.status = DECODER_OK};
    uint8_t *screen = NULL;
    GifByteType *line = NULL;
    *ow = (uint32_t)gif->SWidth, *oh = (uint32_t)gif->SHeight;
    uint64_t pixels = (uint64_t)*ow * *oh;
    if (*ow == 0 || *oh == 0) {
        result = fail(DECODER_FAILED, "GIF: an empty logical screen");
        goto done;
    }
    if (pixels > rq->max_pixels || pixels > rq->max_source_pixels) {
        result = fail(DECODER_TOO_LARGE, "GIF of %u x %u pixels is over the limit of %llu", *ow, *oh,
                      (unsigned long long)rq->max_pixels);
        goto done;
    }
    int transparent = -1;
    for (;;) {
        GifRecordType type;
        if (DGifGetRecordType(gif, &type) == GIF_ERROR) {
            result = fail(DECODER_FAILED, "GIF: %s", GifErrorString(gif->Error));
            goto done;
        }
        if (type == TERMINATE_RECORD_TYPE) {
            result = fail(DECODER_FAILED, "GIF: no image in it");
            goto done;
        }
        if (type == EXTENSION_RECORD_TYPE) {
            int code;
            GifByteType *ext;
            if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) {
                result = fail(DECODER_FAILED, "GIF: %s", GifErrorString(gif->Error));
                goto done;
            }
            GraphicsControlBlock gcb;
            if (code == GRAPHICS_EXT_FUNC_CODE && ext && DGifExtensionToGCB(ext[0], ext + 1, &gcb) == GIF_OK)
                transparent = gcb.TransparentColor;
            while (ext) {
                if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) {
                    result = fail(DECODER_FAILED, "GIF: %s", GifErrorString(gif->Error));
                    goto done;
                }
            }
            continue;
        }
        if (type != IMAGE_DESC_RECORD_TYPE) continue;
        if (DGifGetImageDesc(gif) == GIF_ERROR) {
            result = fail(DECODER_FAILED, "GIF: %s", GifErrorString(gif->Error));
            goto done;
        }
        break;
    }
    const ColorMapObject *map = gif->Image.ColorMap ? gif->Image.ColorMap : gif->SColorMap;
    int left = gif->Image.Left, top = gif->Image.Top, width = gif->Image.Width, height = gif->Image.Height;
    if (!map || width <= 0 || height <= 0 || width > 65535 || height > 65535) {
        result = fail(DECODER_FAILED, "GIF: a frame without colours or size");
        goto done;
    }
    screen = calloc((size_t)*ow * *oh, 4);  // transparent where the frame does not reach
    line = malloc((size_t)width);
    if (!screen || !line) {
        result = fail(DECODER_TOO_LARGE, "no memory for the GIF's pixels");
        goto done;
    }
    // Interlaced frames come in four passes of rows.
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    int passes = gif->Image.Interlace ? 4 : 1;
    for (int pass = 0; pass < passes; pass++) {
        for (int row = passes == 1 ? 0 : start[pass]; row < height; row += passes == 1 ? 1 : step[pass]) {
            if (DGifGetLine(gif, line, width) == GIF_ERROR) {
                result = fail(DECODER_FAILED, "GIF: %s", GifErrorString(gif->Error));
                goto done;
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
    uint32_t tw, th;
    fit(*ow, *oh, rq->max_width, rq->max_height, &tw, &th);
    if (canvas_make(out, tw, th) != 0 || resample(screen, *ow, *oh, (size_t)*ow * 4, 1, out) != 0) {
        result = fail(DECODER_FAILED, "no room for the pixels: %s", strerror(errno));
        goto done;
    }
done:
    free(screen);
    free(line);
    DGifCloseFile(gif, &error);
    return result;
}

// ---- requests -------------------------------------------------------------------------------------

static outcome decode(const uint8_t *data, size_t size, const struct decoder_request *rq, canvas *out,
                      uint32_t *ow, uint32_t *oh) {
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (size >= 8 && memcmp(data, png, 8) == 0) return decode_png(data, size, rq, out, ow, oh);
    if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return decode_jpeg(data, size, rq, out, ow, oh);
    if (size >= 12 && memcmp(data, "RIFF", 4) == 0 && memcmp(data + 8, "WEBP", 4) == 0)
        return decode_webp(data, size, rq, out, ow, oh);
    if (size >= 6 && (memcmp(data, "GIF87a", 6) == 0 || memcmp(data, "GIF89a", 6) == 0))
        return decode_gif(data, size, rq, out, ow, oh);
    return fail(DECODER_NOT_AN_IMAGE, "not a PNG, JPEG, WebP or GIF image");
}

static void reply(int sock, struct decoder_reply *r, int fd) {
    if (decoder_send(sock, r, sizeof *r, fd, 0) < 0) _exit(0);  // the agent is gone
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
};

struct sandbox { int no_new_privs, network_namespace, seccomp; };

static struct sandbox lock_in(void) {
    struct sandbox s = {0};
    // Memory for one large image and its decoder, and CPU for many: a request that would take more
    // ends the process (the agent times each request out long before, and starts another decoder).
    struct rlimit as = {2ul << 30, 2ul << 30}, cpu = {120, 120}, nproc = {0, 0};
    setrlimit(RLIMIT_AS, &as);
    setrlimit(RLIMIT_CPU, &cpu);
    setrlimit(RLIMIT_NPROC, &nproc);
    s.no_new_privs = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
    // No network where the kernel lets an unprivileged process have a namespace of its own.
    s.network_namespace = unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0 || unshare(CLONE_NEWNET) == 0;
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (ctx) {
        int ok = 1;
        for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++)
            ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0) == 0;
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
    int test = argc > 1 && strcmp(argv[1], "--test-sandbox") == 0;
    if (argc > 1 && !test) {
        fprintf(stderr, "usage: netactivity-decoder [--test-sandbox | --version]\n");
        return 64;
    }
    // The libraries are linked in and resolved at start; nothing is loaded after the lock.
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
        printf("memfd_create %s\n", outcome_of(syscall(SYS_memfd_create, "probe", 0)));
        fflush(stdout);
        return 0;
    }
    // Locked in: the agent hears it before anything is asked (a decoder that ends before this line
    // never started, which tells the agent its bubblewrap does not work here).
    struct decoder_reply ready = {.magic = DECODER_REPLY_MAGIC, .status = DECODER_READY};
    snprintf(ready.message, sizeof ready.message, "no_new_privs %d, network_namespace %d, seccomp %d",
             s.no_new_privs, s.network_namespace, s.seccomp);
    reply(0, &ready, -1);
    serve(0);
    return 0;
}
