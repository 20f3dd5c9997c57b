# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The web's formats and their colours in netactivity-decoder, spoken to as the agent speaks to it:
AVIF, HEIF and JPEG XL made by their own encoders (avifenc, heif-enc, cjxl), colour profiles (ICC
and CICP) converted to sRGB or kept as they are, HDR mapped into SDR, animations' frames counted,
and each format's hostile files (a header that claims 100000 x 100000, cut and damaged bytes)."""
import os
import struct
import subprocess
import tempfile
import unittest
import zlib

from colour import P3_PROFILE, p3_to_srgb, with_icc
from test_decoder import DECODER, FAILED, NOT_AN_IMAGE, OK, TOO_LARGE, Decoder, magick, png

COLOR_AS_IS, ANIMATION = 1, 2
PROFILE_NONE, PROFILE_ICC, PROFILE_CICP, PROFILE_INVALID = range(4)
SPACE_SRGB, SPACE_AS_IS = range(2)


def encode(tool, data, suffix, *options):
    """What an encoder makes of PNG `data`: avifenc, heif-enc or cjxl, with `options`."""
    with tempfile.TemporaryDirectory() as d:
        source, out = os.path.join(d, "in.png"), os.path.join(d, "out." + suffix)
        with open(source, "wb") as f:
            f.write(data)
        command = {"avifenc": ["avifenc", "-j", "1", *options, source, out],
                   "heif-enc": ["heif-enc", *options, source, "-o", out],
                   "cjxl": ["cjxl", source, out, *options]}[tool]
        subprocess.run(command, check=True, timeout=60, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out, "rb") as f:
            return f.read()


def halves(width=64, height=32, left=(200, 30, 40, 255), right=(20, 60, 220, 255)):
    """A PNG whose left half is one colour and right half another."""
    return png(width, height, lambda x, y: left if x < width // 2 else right)


def with_chunk(data, kind, payload):
    """The PNG with a chunk put right after its IHDR."""
    chunk = struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
    return data[:33] + chunk + data[33:]


def jxl_header(width, height):
    """The first bytes of a JPEG XL codestream that says it is `width` x `height` (SizeHeader with
    30-bit sides, default metadata), and nothing after them."""
    bits = []

    def put(value, count):
        bits.extend((value >> i) & 1 for i in range(count))
    put(0, 1)                         # not a multiple of 8
    put(3, 2), put(height - 1, 30)    # height: the 30-bit form
    put(0, 3)                         # no ratio: the width follows
    put(3, 2), put(width - 1, 30)
    put(1, 1)                         # all_default metadata
    bits += [0] * (-len(bits) % 8)
    return b"\xff\x0a" + bytes(sum(bit << i for i, bit in enumerate(bits[at:at + 8])) for at in range(0, len(bits), 8))


def gif_bomb(frames, side):
    """A GIF whose `side` x `side` screen has `frames` frames of one pixel each: a few bytes a frame."""
    screen = b"GIF89a" + struct.pack("<HH", side, side) + b"\x80\x00\x00" + b"\xff\x00\x00\x00\x00\xff"
    frame = b"\x2c" + struct.pack("<HHHH", 0, 0, 1, 1) + b"\x00" + b"\x02\x02\x44\x01\x00"
    return screen + frame * frames + b"\x3b"


def apng(colours, width=20, height=10, delay_ms=100, plays=0, sub_frame=None):
    """An animated PNG whose frames are solid `colours` (RGBA), frame 0 its default image, each
    `delay_ms` long; `sub_frame` (x, y, w, h, colour): one more frame, smaller, drawn over the last."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    def rows(w, h, colour):
        return zlib.compress(b"".join(b"\0" + bytes(colour) * w for _ in range(h)))
    frames = [(0, 0, width, height, c) for c in colours] + ([sub_frame] if sub_frame else [])
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0))
    out += chunk(b"acTL", struct.pack(">II", len(frames), plays))
    sequence = 0
    for k, (x, y, w, h, colour) in enumerate(frames):
        out += chunk(b"fcTL", struct.pack(">IIIIIHHBB", sequence, w, h, x, y, delay_ms, 1000, 0, 1))
        sequence += 1
        if k == 0:
            out += chunk(b"IDAT", rows(w, h, colour))
        else:
            out += chunk(b"fdAT", struct.pack(">I", sequence) + rows(w, h, colour))
            sequence += 1
    return out + chunk(b"IEND", b"")


def animations():
    """The same three frames (red, green, blue) as an animated GIF (10, 20 and 30 ms, played twice),
    WebP (100 ms each) and AVIF sequence (5 frames a second)."""
    frames = [png(20, 10, lambda x, y, c=c: c + (255,)) for c in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    with tempfile.TemporaryDirectory() as d:
        names = []
        for i, frame in enumerate(frames):
            names.append(os.path.join(d, "%d.png" % i))
            with open(names[-1], "wb") as f:
                f.write(frame)
        gif = magick("-delay", "1", names[0], "-delay", "2", names[1], "-delay", "3", names[2], "-loop", "2",
                     suffix="gif")
        for command in (["img2webp", "-loop", "0", "-lossless", "-d", "100", *names, "-o", os.path.join(d, "a.webp")],
                        ["avifenc", "-j", "1", "--lossless", "--fps", "5", *names, os.path.join(d, "a.avif")]):
            subprocess.run(command, check=True, timeout=60, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(d, "a.webp"), "rb") as f:
            webp = f.read()
        with open(os.path.join(d, "a.avif"), "rb") as f:
            avif = f.read()
    return {"GIF": gif, "WebP": webp, "AVIF": avif,
            "APNG": apng([(255, 0, 0, 255), (0, 255, 0, 255), (0, 0, 255, 255)], delay_ms=100, plays=2)}


def with_ispe(data, width, height):
    """The AVIF or HEIF file with every "ispe" box claiming `width` x `height`."""
    out, at = bytearray(data), 0
    while (at := data.find(b"ispe", at + 1)) > 0:
        out[at + 8:at + 16] = struct.pack(">II", width, height)
    return bytes(out)


class DecoderCase(unittest.TestCase):
    """A decoder of its own for each test (`svg`: the SVG decoder), and its replies' pixels."""
    svg = False

    def setUp(self):
        self.decoder = Decoder(svg=self.svg)

    def tearDown(self):
        self.assertEqual(self.decoder.close(), 0, "the decoder left cleanly")

    def pixel(self, reply, pixels, x, y):
        """(r, g, b, a) of the premultiplied BGRA reply at (x, y)."""
        at = y * reply["stride"] + x * 4
        b, g, r, a = pixels[at:at + 4]
        return r, g, b, a


@unittest.skipUnless(os.path.exists(DECODER), "netactivity-decoder is not built")
class FormatTests(DecoderCase):
    """AVIF, HEIF and JPEG XL as their encoders make them."""

    @classmethod
    def setUpClass(cls):
        cls.files = {
            "avif": encode("avifenc", halves(), "avif", "--lossless"),
            "heif": encode("heif-enc", halves(), "heic", "-L", "-p", "chroma=444"),
            "jxl": encode("cjxl", halves(), "jxl", "-d", "0"),
        }

    def assertColour(self, got, expected, tolerance, what):
        self.assertTrue(all(abs(g - e) <= tolerance for g, e in zip(got, expected)), "%s: %s, not %s" % (what, got, expected))

    def test_each_format_decodes_to_its_colours_in_its_box(self):
        tolerance = {"avif": 1, "heif": 4, "jxl": 0}
        for name, data in self.files.items():
            reply, pixels, _ = self.decoder.decode(data)
            self.assertEqual(reply["status"], OK, (name, reply["message"]))
            self.assertEqual((reply["width"], reply["height"], reply["frames"]), (64, 32, 1), name)
            self.assertColour(self.pixel(reply, pixels, 5, 5), (200, 30, 40, 255), tolerance[name], name + " left")
            self.assertColour(self.pixel(reply, pixels, 60, 20), (20, 60, 220, 255), tolerance[name], name + " right")
            self.assertEqual((reply["color_profile"], reply["color_space"]), (PROFILE_NONE, SPACE_SRGB), name)
            reply, pixels, _ = self.decoder.decode(data, max_width=16)
            self.assertEqual((reply["status"], reply["width"], reply["height"]), (OK, 16, 8), name)
            self.assertEqual((reply["original_width"], reply["original_height"]), (64, 32), name)
            self.assertColour(self.pixel(reply, pixels, 1, 4), (200, 30, 40, 255), tolerance[name] + 1, name + " boxed")

    def test_ten_bit_avif_comes_as_eight_bits(self):
        data = encode("avifenc", halves(), "avif", "--lossless", "-d", "10")
        reply, pixels, _ = self.decoder.decode(data)
        self.assertEqual(reply["status"], OK, reply["message"])
        self.assertColour(self.pixel(reply, pixels, 5, 5), (200, 30, 40, 255), 2, "10-bit")

    def test_hdr_pq_is_mapped_into_sdr_and_kept_as_is_on_request(self):
        # 148 of 255 in PQ is about 203 cd/m2, SDR's white: shown near white, not as a mid grey.
        grey = png(8, 8, lambda x, y: (148, 148, 148, 255))
        data = encode("avifenc", grey, "avif", "--lossless", "--cicp", "9/16/0")
        reply, pixels, _ = self.decoder.decode(data)
        self.assertEqual((reply["status"], reply["color_profile"], reply["color_space"]), (OK, PROFILE_CICP, SPACE_SRGB))
        r, g, b, _ = self.pixel(reply, pixels, 4, 4)
        self.assertTrue(225 <= g <= 252 and abs(r - g) <= 3 and abs(b - g) <= 3, (r, g, b))
        reply, pixels, _ = self.decoder.decode(data, flags=COLOR_AS_IS)
        self.assertEqual((reply["color_profile"], reply["color_space"]), (PROFILE_CICP, SPACE_AS_IS))
        self.assertColour(self.pixel(reply, pixels, 4, 4), (148, 148, 148, 255), 1, "as-is")

    def test_a_display_p3_photo_is_converted_to_srgb(self):
        colour = (204, 102, 51)
        expected = p3_to_srgb(colour)
        self.assertNotEqual(expected, colour, "the test's colour differs between the spaces")
        tagged_png = with_chunk(png(8, 8, lambda x, y: colour + (255,)), b"iCCP", b"P3\0\0" + zlib.compress(P3_PROFILE))
        jpeg = magick("-size", "8x8", "xc:rgb(%d,%d,%d)" % colour, "-quality", "100", suffix="jpg")
        tagged_jpeg = with_icc(jpeg, P3_PROFILE)
        cicp_avif = encode("avifenc", png(8, 8, lambda x, y: colour + (255,)), "avif", "--lossless", "--cicp", "12/13/0")
        for name, data, profile, tolerance in (("PNG", tagged_png, PROFILE_ICC, 1), ("JPEG", tagged_jpeg, PROFILE_ICC, 3),
                                                ("AVIF", cicp_avif, PROFILE_CICP, 2),
                                                ("JPEG XL", encode("cjxl", tagged_png, "jxl", "-d", "0"), PROFILE_ICC, 2)):
            reply, pixels, _ = self.decoder.decode(data)
            self.assertEqual((reply["status"], reply["color_profile"], reply["color_space"]), (OK, profile, SPACE_SRGB),
                             (name, reply["message"]))
            self.assertColour(self.pixel(reply, pixels, 4, 4)[:3], expected, tolerance, name)
            reply, pixels, _ = self.decoder.decode(data, flags=COLOR_AS_IS)
            self.assertEqual(reply["color_space"], SPACE_AS_IS, name)
            self.assertColour(self.pixel(reply, pixels, 4, 4)[:3], colour, tolerance, name + " as-is")

    def test_a_profile_that_is_garbage_is_ignored_and_said_so(self):
        colour = (10, 200, 100)
        data = with_chunk(png(4, 4, lambda x, y: colour + (255,)), b"iCCP", b"junk\0\0" + zlib.compress(os.urandom(300)))
        reply, pixels, _ = self.decoder.decode(data)
        self.assertEqual((reply["status"], reply["color_profile"], reply["color_space"]), (OK, PROFILE_INVALID, SPACE_SRGB))
        self.assertColour(self.pixel(reply, pixels, 1, 1)[:3], colour, 0, "its own values")

    def test_animations_say_their_frames_and_give_the_first(self):
        for name, data in animations().items():
            reply, pixels, _ = self.decoder.decode(data)
            self.assertEqual((reply["status"], reply["frames"], reply["frames_sent"], reply["width"]), (OK, 3, 1, 20),
                             (name, reply["message"]))
            self.assertEqual(len(pixels), 20 * 4 * 10, name + ": one frame")
            self.assertEqual(reply["durations"], [], name)
            self.assertColour(self.pixel(reply, pixels, 2, 2), (255, 0, 0, 255), 2, name + " first frame")

    def test_an_animation_comes_whole_frame_after_frame_with_its_timing(self):
        # The GIF's 10 ms is played at 100 ms, as browsers do.
        durations = {"GIF": [100, 20, 30], "WebP": [100, 100, 100], "AVIF": [200, 200, 200], "APNG": [100, 100, 100]}
        for name, data in animations().items():
            reply, pixels, _ = self.decoder.decode(data, max_width=10, flags=ANIMATION)
            self.assertEqual((reply["status"], reply["frames"], reply["frames_sent"]), (OK, 3, 3), (name, reply["message"]))
            self.assertEqual((reply["width"], reply["height"]), (10, 5), name)
            self.assertEqual(len(pixels), 3 * 10 * 4 * 5, name + ": three whole frames")
            self.assertEqual(reply["durations"], durations[name], name)
            frame = 10 * 4 * 5
            for k, colour in enumerate(((255, 0, 0, 255), (0, 255, 0, 255), (0, 0, 255, 255))):
                b, g, r, a = pixels[k * frame + 44:k * frame + 48]
                self.assertColour((r, g, b, a), colour, 2, "%s frame %d" % (name, k))
        for name in ("GIF", "APNG"):
            reply, _, _ = self.decoder.decode(animations()[name], flags=ANIMATION)
            self.assertEqual(reply["loop_count"], 2, "the %s plays twice" % name)
        reply, pixels, _ = self.decoder.decode(animations()["WebP"], flags=ANIMATION, max_frames=2)
        self.assertEqual((reply["frames"], reply["frames_sent"], len(reply["durations"])), (3, 2, 2), "capped")

    def test_an_apng_frame_is_drawn_over_the_one_before(self):
        # A half-transparent white 4 x 4 frame over the blue one, at (2, 2): blended, the rest kept.
        data = apng([(0, 0, 255, 255)], sub_frame=(2, 2, 4, 4, (255, 255, 255, 128)))
        reply, pixels, _ = self.decoder.decode(data, flags=ANIMATION)
        self.assertEqual((reply["status"], reply["frames"], reply["frames_sent"]), (OK, 2, 2), reply["message"])
        second = pixels[20 * 4 * 10:]
        b, g, r, a = second[(3 * 20 + 3) * 4:(3 * 20 + 3) * 4 + 4]
        self.assertEqual(a, 255)
        self.assertTrue(abs(r - 128) <= 2 and abs(b - 255) <= 2, (r, g, b))
        self.assertEqual(tuple(second[0:4]), (255, 0, 0, 255), "blue outside the small frame (BGRA)")

    def test_a_frame_count_bomb_is_too_large_from_its_header_or_capped(self):
        bomb = gif_bomb(100000, 1000)
        reply, pixels, _ = self.decoder.decode(bomb, flags=ANIMATION, timeout=20)
        self.assertEqual(reply["status"], TOO_LARGE, reply["message"])
        self.assertIn("frames", reply["message"])
        reply, pixels, _ = self.decoder.decode(bomb, max_width=16, flags=ANIMATION, timeout=20)
        self.assertEqual((reply["status"], reply["frames"], reply["frames_sent"]), (OK, 100000, 1000), reply["message"])
        self.assertEqual(len(pixels), 1000 * 16 * 16 * 4)
        reply, _, _ = self.decoder.decode(bomb, max_width=16, timeout=20)
        self.assertEqual((reply["status"], reply["frames_sent"]), (OK, 1), "without the animation: its first frame")

    def test_a_header_of_100000_by_100000_is_too_large_for_each_format(self):
        for name, data in (("AVIF", with_ispe(self.files["avif"], 100000, 100000)),
                           ("HEIF", with_ispe(self.files["heif"], 100000, 100000)),
                           ("JPEG XL", jxl_header(100000, 100000))):
            reply, pixels, _ = self.decoder.decode(data, timeout=10)
            self.assertEqual(reply["status"], TOO_LARGE, (name, reply["message"]))
            self.assertIn("100000 x 100000", reply["message"], name)
            self.assertIsNone(pixels)

    def test_cut_and_damaged_files_fail_that_request_alone(self):
        for name, data in self.files.items():
            half = data[:len(data) // 2]
            damaged = bytearray(data)
            for at in range(len(data) // 3, len(data), 7):
                damaged[at] ^= 0x5A
            for kind, bad in (("cut", half), ("damaged", bytes(damaged)), ("header only", data[:40])):
                reply, pixels, _ = self.decoder.decode(bad, timeout=10)
                self.assertIn(reply["status"], (FAILED, NOT_AN_IMAGE, OK), (name, kind))
                if reply["status"] == OK:  # damage a decoder can conceal: still its size
                    self.assertEqual((reply["width"], reply["height"]), (64, 32), (name, kind))
            reply, _, _ = self.decoder.decode(data)
            self.assertEqual(reply["status"], OK, name + ": the next request is decoded as usual")


SVG = b"""<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20">
<rect width="20" height="20" fill="#c81e28"/><rect x="20" width="20" height="20" fill="#143cdc"/></svg>"""


@unittest.skipUnless(os.path.exists(DECODER), "netactivity-decoder is not built")
class SvgTests(DecoderCase):
    """SVG in the SVG decoder (`--svg`, librsvg): drawn at the box, nothing outside the document
    reached, pathological documents ending as a failure of their own request."""

    svg = True

    def test_an_svg_is_drawn_at_its_size_or_at_the_box_up_and_down(self):
        self.assertIn("svg 1", self.decoder.ready["message"], "librsvg loaded before the lock")
        reply, pixels, _ = self.decoder.decode(SVG)
        self.assertEqual((reply["status"], reply["width"], reply["height"]), (OK, 40, 20), reply["message"])
        self.assertEqual(self.pixel(reply, pixels, 5, 5), (200, 30, 40, 255))
        self.assertEqual(self.pixel(reply, pixels, 35, 15), (20, 60, 220, 255))
        # A vector scales up to its box as well as down, its aspect kept.
        reply, pixels, _ = self.decoder.decode(SVG, max_width=400, max_height=400)
        self.assertEqual((reply["width"], reply["height"], reply["original_width"]), (400, 200, 40))
        self.assertEqual(self.pixel(reply, pixels, 390, 150), (20, 60, 220, 255))
        reply, _, _ = self.decoder.decode(SVG, max_width=10)
        self.assertEqual((reply["width"], reply["height"]), (10, 5))

    def test_text_is_drawn_with_the_systems_fonts(self):
        text = b"""<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40"><rect width="120" height="40"
            fill="white"/><text x="4" y="30" font-family="sans-serif" font-size="28" fill="black">Hello</text></svg>"""
        reply, pixels, _ = self.decoder.decode(text)
        self.assertEqual(reply["status"], OK, reply["message"])
        dark = sum(1 for i in range(0, len(pixels), 4) if pixels[i] < 64)
        self.assertGreater(dark, 100, "glyphs were drawn")

    def test_nothing_outside_the_document_is_read(self):
        with tempfile.TemporaryDirectory() as d:
            red = os.path.join(d, "red.png")
            with open(red, "wb") as f:
                f.write(png(4, 4, lambda x, y: (255, 0, 0, 255)))
            for href in ("file://" + red, red, "http://127.0.0.1:9/red.png"):
                doc = ("""<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"
                    width="8" height="8"><image width="8" height="8" xlink:href="%s"/></svg>""" % href).encode()
                reply, pixels, _ = self.decoder.decode(doc)
                self.assertIn(reply["status"], (OK, FAILED), href)
                if pixels:
                    self.assertNotIn((255, 0, 0, 255), {self.pixel(reply, pixels, 4, 4)}, href + ": not loaded")

    def test_a_pathological_svg_fails_alone_and_a_huge_one_is_too_large(self):
        deep = b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">' + b"<g>" * 200000 + \
            b"</g>" * 200000 + b"</svg>"
        reply, _, _ = self.decoder.decode(deep, timeout=20)
        self.assertIn(reply["status"], (OK, FAILED), reply["message"])
        huge = b'<svg xmlns="http://www.w3.org/2000/svg" width="100000" height="100000"/>'
        reply, _, _ = self.decoder.decode(huge)
        self.assertEqual(reply["status"], TOO_LARGE, reply["message"])
        reply, _, _ = self.decoder.decode(b"<svg xmlns='http://www.w3.org/2000/svg' width='10'")
        self.assertEqual(reply["status"], FAILED, "a cut document")
        reply, _, _ = self.decoder.decode(SVG)
        self.assertEqual(reply["status"], OK, "the next one is drawn as usual")

    def test_the_svg_decoder_is_locked_in_as_the_other(self):
        out = subprocess.run([DECODER, "--svg", "--test-sandbox"], capture_output=True, text=True, timeout=30).stdout
        seen = dict(line.split() for line in out.splitlines())
        for call in ("openat", "socket", "connect", "execve", "fork"):
            self.assertEqual(seen.get(call), "EPERM", (call, out))


if __name__ == "__main__":
    unittest.main()
