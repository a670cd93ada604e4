# errors.py — the exceptions the hoff package raises of its own: HoffError (a hoff call failed, with its errno) and
# LibraryNotFound (libhoff.so could not be found or loaded).  The public home of both: `from hoff.errors import
# HoffError` or `from hoff import HoffError`; hoff._targets.HoffError and hoff._lib.LibraryNotFound are the same
# classes, kept for older imports.  Threading: plain exception classes; safe anywhere.
"""The exceptions of the hoff package."""

from __future__ import annotations

__all__ = ["HoffError", "LibraryNotFound"]


class HoffError(RuntimeError):
    """A hoff call failed; .errno is the positive errno value."""

    errno: int

    def __init__(self, msg: str, errno: int = 0) -> None:
        super().__init__(msg)
        self.errno = errno


class LibraryNotFound(RuntimeError):
    """libhoff.so could not be found or loaded; the message lists every place tried."""
