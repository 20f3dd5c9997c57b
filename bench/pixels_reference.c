// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// The bench's reference for decoded pixels: an app that does it all itself, in-process, as apps do
// today: libcurl downloads, libjpeg-turbo, libspng, libavif, libjxl and librsvg decode to
// premultiplied B8G8R8A8 (what GTK 4 takes; AVIF and JPEG XL in one thread, as the agent's decoder
// does), and the
// app keeps the pixels and reads every page of them, as pixels_app does with the agent's.
//
//   pixels_reference show URL...        download and decode every URL, one after another (one curl
//                                       handle: its connection reused), print "ready ...", then hold
//                                       the pixels until standard input ends
//   pixels_reference decode N BOX FILE  decode FILE N times, keeping each result as an app showing
//                                       them does (BOX > 0: the whole image, then a box filter down
//                                       to fit BOX x BOX, keeping that): "images_per_s=..."
//   pixels_reference animation FILE     an animated GIF (giflib), every frame composed on its canvas
//                                       at its full size and kept, as an app playing it does:
//                                       "first_ms=... all_ms=... frames=... bytes=..."
#include <avif/avif.h>
#include <curl/curl.h>
#include <gif_lib.h>
#include <jxl/decode.h>
#include <librsvg/rsvg.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <jpeglib.h>
#include <setjmp.h>
#include <spng.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clocks.h"

typedef struct { uint8_t *pixels; uint32_t width, height; } image;
typedef struct { uint8_t *data; size_t size, capacity; } buffer;

static struct jpeg_error_mgr jerr;
static jmp_buf jpeg_failed;
static void on_jpeg_error(j_common_ptr info) { (void)info; longjmp(jpeg_failed, 1); }

static int decode_jpeg(const uint8_t *data, size_t size, image *out) {
    struct jpeg_decompress_struct d;
    d.err = jpeg_std_error(&jerr);
    jerr.error_exit = on_jpeg_error;
    if (setjmp(jpeg_failed)) {
        jpeg_destroy_decompress(&d);
        return -1;
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, data, (unsigned long)size);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = JCS_EXT_BGRA;  // opaque: premultiplied as it is
    jpeg_start_decompress(&d);
    out->width = d.output_width, out->height = d.output_height;
    out->pixels = malloc((size_t)out->width * out->height * 4);
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = out->pixels + (size_t)d.output_scanline * out->width * 4;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return 0;
}

static int decode_png(const uint8_t *data, size_t size, image *out) {
    spng_ctx *ctx = spng_ctx_new(0);
    struct spng_ihdr ihdr;
    size_t length;
    int r = spng_set_png_buffer(ctx, data, size);
    if (!r) r = spng_get_ihdr(ctx, &ihdr);
    if (!r) r = spng_decoded_image_size(ctx, SPNG_FMT_RGBA8, &length);
    if (!r) {
        out->width = ihdr.width, out->height = ihdr.height;
        out->pixels = malloc(length);
        r = spng_decode_image(ctx, out->pixels, length, SPNG_FMT_RGBA8, SPNG_DECODE_TRNS);
    }
    spng_ctx_free(ctx);
    if (r) return -1;
    for (size_t i = 0; i < length; i += 4) {  // RGBA to premultiplied BGRA
        uint8_t *p = out->pixels + i, red = p[0], a = p[3];
        p[0] = (uint8_t)((p[2] * a + 127) / 255);
        p[1] = (uint8_t)((p[1] * a + 127) / 255);
        p[2] = (uint8_t)((red * a + 127) / 255);
    }
    return 0;
}

static void straight_rgba_to_premultiplied_bgra(uint8_t *pixels, size_t length) {
    for (size_t i = 0; i < length; i += 4) {
        uint8_t *p = pixels + i, red = p[0], a = p[3];
        p[0] = (uint8_t)((p[2] * a + 127) / 255);
        p[1] = (uint8_t)((p[1] * a + 127) / 255);
        p[2] = (uint8_t)((red * a + 127) / 255);
    }
}

static int decode_avif(const uint8_t *data, size_t size, image *out) {
    avifDecoder *d = avifDecoderCreate();
    d->maxThreads = 1;
    avifRGBImage rgb;
    int ok = avifDecoderSetIOMemory(d, data, size) == AVIF_RESULT_OK && avifDecoderParse(d) == AVIF_RESULT_OK &&
             avifDecoderNextImage(d) == AVIF_RESULT_OK;
    if (ok) {
        avifRGBImageSetDefaults(&rgb, d->image);
        rgb.format = AVIF_RGB_FORMAT_BGRA, rgb.depth = 8, rgb.alphaPremultiplied = AVIF_TRUE;
        rgb.rowBytes = d->image->width * 4;
        out->width = d->image->width, out->height = d->image->height;
        rgb.pixels = out->pixels = malloc((size_t)rgb.rowBytes * out->height);
        ok = avifImageYUVToRGB(d->image, &rgb) == AVIF_RESULT_OK;
    }
    avifDecoderDestroy(d);
    return ok ? 0 : -1;
}

static int decode_jxl(const uint8_t *data, size_t size, image *out) {
    JxlDecoder *d = JxlDecoderCreate(NULL);  // one thread
    JxlPixelFormat format = {4, JXL_TYPE_UINT8, JXL_NATIVE_ENDIAN, 0};
    JxlBasicInfo info;
    int ok = JxlDecoderSubscribeEvents(d, JXL_DEC_BASIC_INFO | JXL_DEC_FULL_IMAGE) == JXL_DEC_SUCCESS &&
             JxlDecoderSetInput(d, data, size) == JXL_DEC_SUCCESS, done = 0;
    JxlDecoderCloseInput(d);
    while (ok && !done) {
        switch (JxlDecoderProcessInput(d)) {
        case JXL_DEC_BASIC_INFO:
            JxlDecoderGetBasicInfo(d, &info);
            out->width = info.xsize, out->height = info.ysize;
            break;
        case JXL_DEC_NEED_IMAGE_OUT_BUFFER: {
            size_t n = (size_t)out->width * out->height * 4;
            out->pixels = malloc(n);
            ok = JxlDecoderSetImageOutBuffer(d, &format, out->pixels, n) == JXL_DEC_SUCCESS;
            break;
        }
        case JXL_DEC_FULL_IMAGE: done = 1; break;
        default: ok = 0;
        }
    }
    JxlDecoderDestroy(d);
    if (!ok) return -1;
    straight_rgba_to_premultiplied_bgra(out->pixels, (size_t)out->width * out->height * 4);
    return 0;
}

// An SVG drawn at its own size by librsvg into premultiplied ARGB32 (B, G, R, A in memory).
static int decode_svg(const uint8_t *data, size_t size, image *out) {
    RsvgHandle *handle = rsvg_handle_new_from_data(data, size, NULL);
    double w = 0, h = 0;
    if (!handle || !rsvg_handle_get_intrinsic_size_in_pixels(handle, &w, &h)) return -1;
    out->width = (uint32_t)ceil(w), out->height = (uint32_t)ceil(h);
    out->pixels = calloc((size_t)out->width * out->height, 4);
    cairo_surface_t *surface = cairo_image_surface_create_for_data(out->pixels, CAIRO_FORMAT_ARGB32, (int)out->width,
                                                                   (int)out->height, (int)out->width * 4);
    cairo_t *cr = cairo_create(surface);
    RsvgRectangle viewport = {0, 0, out->width, out->height};
    int ok = rsvg_handle_render_document(handle, cr, &viewport, NULL);
    cairo_destroy(cr);
    cairo_surface_destroy(surface);
    g_object_unref(handle);
    return ok ? 0 : -1;
}

static int decode(const uint8_t *data, size_t size, image *out) {
    if (size > 5 && (memcmp(data, "<svg", 4) == 0 || memcmp(data, "<?xml", 5) == 0)) return decode_svg(data, size, out);
    if (size > 3 && data[0] == 0xFF && data[1] == 0xD8) return decode_jpeg(data, size, out);
    if (size > 8 && data[0] == 0x89 && data[1] == 'P') return decode_png(data, size, out);
    if (size > 12 && memcmp(data + 4, "ftyp", 4) == 0) return decode_avif(data, size, out);
    if (size > 2 && data[0] == 0xFF && data[1] == 0x0A) return decode_jxl(data, size, out);
    return -1;
}

// A GIF's first frame alone, read as a stream (what a viewer shows first): its time, s.
static double gif_first_frame(const char *path) {
    int error = 0;
    double t0 = now();
    GifFileType *gif = DGifOpenFileName(path, &error);
    GifRecordType type;
    uint8_t *screen = gif ? calloc((size_t)gif->SWidth * gif->SHeight, 4) : NULL;
    while (gif && DGifGetRecordType(gif, &type) == GIF_OK && type != TERMINATE_RECORD_TYPE) {
        if (type == EXTENSION_RECORD_TYPE) {
            int code;
            GifByteType *ext;
            DGifGetExtension(gif, &code, &ext);
            while (ext) DGifGetExtensionNext(gif, &ext);
            continue;
        }
        if (type != IMAGE_DESC_RECORD_TYPE || DGifGetImageDesc(gif) != GIF_OK) break;
        const ColorMapObject *map = gif->Image.ColorMap ? gif->Image.ColorMap : gif->SColorMap;
        GifPixelType *line = malloc((size_t)gif->Image.Width);
        for (int y = 0; y < gif->Image.Height && DGifGetLine(gif, line, gif->Image.Width) == GIF_OK; y++)
            for (int x = 0; x < gif->Image.Width; x++) {
                uint8_t *p = screen + ((size_t)(gif->Image.Top + y) * gif->SWidth + gif->Image.Left + x) * 4;
                p[0] = map->Colors[line[x]].Blue, p[1] = map->Colors[line[x]].Green, p[2] = map->Colors[line[x]].Red;
                p[3] = 255;
            }
        free(line);
        break;
    }
    double took = now() - t0;
    free(screen);
    if (gif) DGifCloseFile(gif, &error);
    return took;
}

// An animated GIF as an app playing it holds it: each frame composed over the one before (its
// disposal kept), at the canvas's full size, premultiplied BGRA, every frame kept.
static int animation(const char *path) {
    int error = 0;
    double first = gif_first_frame(path), t0 = now();
    GifFileType *gif = DGifOpenFileName(path, &error);
    if (!gif || DGifSlurp(gif) != GIF_OK) return 1;
    size_t canvas = (size_t)gif->SWidth * gif->SHeight * 4;
    uint8_t *screen = calloc(1, canvas), **frames = calloc((size_t)gif->ImageCount, sizeof *frames);
    for (int k = 0; k < gif->ImageCount; k++) {
        SavedImage *frame = &gif->SavedImages[k];
        GraphicsControlBlock gcb = {.TransparentColor = -1};
        DGifSavedExtensionToGCB(gif, k, &gcb);
        const ColorMapObject *map = frame->ImageDesc.ColorMap ? frame->ImageDesc.ColorMap : gif->SColorMap;
        GifImageDesc *at = &frame->ImageDesc;
        for (int y = 0; y < at->Height; y++)
            for (int x = 0; x < at->Width; x++) {
                int index = frame->RasterBits[(size_t)y * at->Width + x], sx = at->Left + x, sy = at->Top + y;
                if (index == gcb.TransparentColor || sx >= gif->SWidth || sy >= gif->SHeight) continue;
                uint8_t *p = screen + ((size_t)sy * gif->SWidth + sx) * 4;
                p[0] = map->Colors[index].Blue, p[1] = map->Colors[index].Green, p[2] = map->Colors[index].Red, p[3] = 255;
            }
        frames[k] = malloc(canvas);
        memcpy(frames[k], screen, canvas);
        if (gcb.DisposalMode == DISPOSE_BACKGROUND) memset(screen, 0, canvas);
    }
    double all = now() - t0;
    printf("first_ms=%.1f all_ms=%.1f frames=%d bytes=%zu\n", first * 1e3, all * 1e3, gif->ImageCount,
           canvas * (size_t)gif->ImageCount);
    for (int k = 0; k < gif->ImageCount; k++) free(frames[k]);
    free(frames);
    free(screen);
    DGifCloseFile(gif, &error);
    return 0;
}

// A box filter down to fit `box` x `box` (aspect kept): each target pixel the mean of its source area.
static image scaled(image in, uint32_t box) {
    double f = in.width > in.height ? (double)box / in.width : (double)box / in.height;
    image out = {.width = (uint32_t)(in.width * f + 0.5), .height = (uint32_t)(in.height * f + 0.5)};
    out.pixels = malloc((size_t)out.width * out.height * 4);
    for (uint32_t y = 0; y < out.height; y++) {
        uint32_t y0 = (uint32_t)(y / f), y1 = (uint32_t)((y + 1) / f);
        if (y1 > in.height) y1 = in.height;
        for (uint32_t x = 0; x < out.width; x++) {
            uint32_t x0 = (uint32_t)(x / f), x1 = (uint32_t)((x + 1) / f), sum[4] = {0}, n = 0;
            if (x1 > in.width) x1 = in.width;
            for (uint32_t sy = y0; sy < y1; sy++)
                for (uint32_t sx = x0; sx < x1; sx++, n++)
                    for (int c = 0; c < 4; c++) sum[c] += in.pixels[((size_t)sy * in.width + sx) * 4 + c];
            for (int c = 0; c < 4; c++) out.pixels[((size_t)y * out.width + x) * 4 + c] = (uint8_t)(n ? sum[c] / n : 0);
        }
    }
    return out;
}

static size_t received(char *data, size_t size, size_t n, void *user) {
    buffer *b = user;
    size_t more = size * n;
    if (b->size + more > b->capacity) {
        b->capacity = (b->size + more) * 2;
        b->data = realloc(b->data, b->capacity);
    }
    memcpy(b->data + b->size, data, more);
    b->size += more;
    return more;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "show") == 0) {
        CURL *curl = curl_easy_init();
        buffer body = {0};
        uint64_t sum = 0, bytes = 0;
        int failures = 0;
        image *images = calloc((size_t)argc, sizeof *images);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, received);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
        for (int i = 2; i < argc; i++) {
            body.size = 0;
            curl_easy_setopt(curl, CURLOPT_URL, argv[i]);
            if (curl_easy_perform(curl) != CURLE_OK || decode(body.data, body.size, &images[i]) != 0) {
                failures++;
                continue;
            }
            size_t length = (size_t)images[i].width * images[i].height * 4;
            for (size_t p = 0; p < length; p += 4096) sum += images[i].pixels[p];
            bytes += length;
        }
        free(body.data);  // the encoded bytes are not kept, as the agent's apps keep none
        curl_easy_cleanup(curl);
        printf("ready images=%d failures=%d pixel_bytes=%llu sum=%llu\n", argc - 2, failures,
               (unsigned long long)bytes, (unsigned long long)sum);
        fflush(stdout);
        char c;
        while (read(0, &c, 1) > 0) {}
        return failures ? 1 : 0;
    }
    if (argc == 5 && strcmp(argv[1], "decode") == 0) {
        int n = atoi(argv[2]);
        uint32_t box = (uint32_t)atoi(argv[3]);
        FILE *f = fopen(argv[4], "rb");
        if (!f) return 1;
        buffer file = {0};
        char chunk[65536];
        size_t got;
        while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) received(chunk, 1, got, &file);
        fclose(f);
        image *kept = calloc((size_t)n, sizeof *kept);
        double t0 = now(), c0 = cpu_now();
        for (int i = 0; i < n; i++) {
            if (decode(file.data, file.size, &kept[i]) != 0) return 1;
            if (box) {
                image small = scaled(kept[i], box);
                free(kept[i].pixels);
                kept[i] = small;
            }
        }
        double s = now() - t0, cpu = cpu_now() - c0;
        for (int i = 0; i < n; i++) free(kept[i].pixels);
        printf("images_per_s=%.2f seconds=%.3f cpu_ms=%.1f\n", n / s, s, cpu * 1e3);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "animation") == 0) return animation(argv[2]);
    fprintf(stderr, "usage: pixels_reference show URL... | decode N BOX FILE | animation FILE\n");
    return 64;
}
