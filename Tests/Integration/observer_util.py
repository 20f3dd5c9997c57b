"""Shared by the observer processes: D-Bus values as plain JSON-able Python values."""
import dbus


def plain(v):
    if isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, (dbus.Array, list)):
        return [plain(x) for x in v]
    if isinstance(v, (dbus.Struct, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, (dbus.Double, float)):
        return float(v)
    if isinstance(v, (int,)):
        return int(v)
    return str(v)
