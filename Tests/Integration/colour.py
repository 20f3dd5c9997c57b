# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Colour profiles for the tests and the bench: a Display P3 ICC profile written out tag by tag, the
way a P3 photo carries it, and P3 colours as sRGB (through linear light and XYZ), to check the
decoder's conversion against; `with_icc` puts a profile in a JPEG as its APP2 ICC_PROFILE segment."""
import struct


def s15(v):
    return struct.pack(">i", round(v * 65536))


def icc_profile(red, green, blue):
    """A version 2 display profile of RGB colorants (their XYZ adapted to D50) and the sRGB curve:
    what a Display P3 photo carries, written out tag by tag."""
    srgb_curve = b"para" + bytes(4) + struct.pack(">HH", 3, 0) + b"".join(
        s15(v) for v in (2.4, 1 / 1.055, 0.055 / 1.055, 1 / 12.92, 0.04045))
    xyz = lambda v: b"XYZ " + bytes(4) + b"".join(s15(c) for c in v)
    text = b"Display P3 test"
    desc = b"desc" + bytes(4) + struct.pack(">I", len(text) + 1) + text + b"\0" + bytes(4) + bytes(4) + bytes(3 + 67)
    tags = [(b"desc", desc), (b"wtpt", xyz((0.9642, 1.0, 0.8249))), (b"rXYZ", xyz(red)), (b"gXYZ", xyz(green)),
            (b"bXYZ", xyz(blue)), (b"rTRC", srgb_curve), (b"gTRC", srgb_curve), (b"bTRC", srgb_curve)]
    table, body = b"", b""
    offset = 128 + 4 + 12 * len(tags)
    for sig, data in tags:
        data += bytes(-len(data) % 4)
        table += sig + struct.pack(">II", offset + len(body), len(data))
        body += data
    size = offset + len(body)
    header = struct.pack(">I", size) + b"lcms" + struct.pack(">I", 0x02100000) + b"mntrRGB XYZ " + bytes(12) + \
        b"acsp" + bytes(4) + bytes(4) + bytes(8) + bytes(8) + bytes(4) + s15(0.9642) + s15(1.0) + s15(0.8249) + \
        bytes(4) + bytes(16) + bytes(28)
    assert len(header) == 128, len(header)
    return header + struct.pack(">I", len(tags)) + table + body


# Display P3's colorants, adapted to D50 (as Apple's profile gives them).
P3_PROFILE = icc_profile((0.5151, 0.2412, -0.0011), (0.2920, 0.6922, 0.0419), (0.1571, 0.0666, 0.7841))


def p3_to_srgb(rgb):
    """A Display P3 colour (0-255, the sRGB curve) as sRGB (0-255): through linear light and XYZ."""
    def linear(v):
        v /= 255
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    def encoded(v):
        v = min(max(v, 0), 1)
        return 255 * (12.92 * v if v <= 0.0031308 else 1.055 * v ** (1 / 2.4) - 0.055)
    p3_to_xyz = ((0.48657, 0.26567, 0.19822), (0.22897, 0.69174, 0.07929), (0.0, 0.04511, 1.04394))
    xyz_to_srgb = ((3.24097, -1.53738, -0.49861), (-0.96924, 1.87597, 0.04156), (0.05563, -0.20398, 1.05697))
    lin = [linear(v) for v in rgb]
    xyz = [sum(m * c for m, c in zip(row, lin)) for row in p3_to_xyz]
    return tuple(round(encoded(sum(m * c for m, c in zip(row, xyz)))) for row in xyz_to_srgb)


def with_icc(jpeg, profile):
    """The JPEG with `profile` in one APP2 ICC_PROFILE segment, right after its SOI."""
    payload = b"ICC_PROFILE\0\x01\x01" + profile
    return jpeg[:2] + b"\xff\xe2" + struct.pack(">H", len(payload) + 2) + payload + jpeg[2:]
