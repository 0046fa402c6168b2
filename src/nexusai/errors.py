"""Domain errors. The HTTP layer and the CLI turn these into clean messages."""

from __future__ import annotations


def first_line(why: object, limit: int = 200) -> str:
    """What an error says, in one line short enough for a log or a message."""
    text = str(why).strip()
    return text.splitlines()[0][:limit] if text else type(why).__name__


class NexusError(Exception):
    """Base class for errors whose message is safe to show to a user."""

    status_code = 400


class NotFound(NexusError):
    status_code = 404


class InvalidInput(NexusError):
    status_code = 422


class TooLarge(NexusError):
    status_code = 413


class Conflict(NexusError):
    status_code = 409


class StorageFull(NexusError):
    """The disk (or the filesystem's quota) is full: nothing of the write was kept."""

    status_code = 507


DISK_FULL = (
    "the disk is full: nothing of this request was stored; free space on the data"
    " directory's disk and send it again (reads go on working meanwhile)"
)


class NotReady(NexusError):
    """The service answers, but is still getting ready to serve turns at full speed."""

    status_code = 503


class ConfigError(NexusError):
    """A setting in the environment is missing or out of range."""

    status_code = 500
