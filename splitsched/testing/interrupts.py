"""Moved to `splitsched.launch.interrupts` (``splitsched up`` uses it too); this name
stays for the demo and the other commands that import it from here."""

from splitsched.launch.interrupts import stop_like_ctrl_c

__all__ = ["stop_like_ctrl_c"]
