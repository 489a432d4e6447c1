"""One family of expected failures, each with a message a user can act on.

The CLI prints them to stderr and exits 1; the servers turn them into protocol errors.
Anything that is not an EngramError is a bug and keeps its traceback.
"""


class EngramError(Exception):
    """An expected failure whose message tells the user what to do."""


class StoreNotFound(EngramError):
    """No `.engram/` store above the working directory."""


class UnknownTape(EngramError):
    """A tape reference matched nothing (or more than one tape)."""


class BadInput(EngramError):
    """Input the user supplied (a path, a range, a transcript) cannot be used."""


class NotAllowed(BadInput):
    """A request to a running server names something it may not read (the local HTTP endpoint's
    ingest of a path outside the transcript locations); the command line does it itself."""


class CorruptTape(EngramError):
    """A tape file on disk does not match its own seek table or hash."""


class ReadOnlyStore(EngramError):
    """`.engram/` cannot be written (a read-only file system, no write permission): every command
    writes there, a query too (the index's shared memory, locks), so it is said once, plainly."""


class DamagedIndex(EngramError):
    """index.sqlite is not a readable SQLite database (it is rebuilt from the tapes)."""


class UnknownMemory(EngramError):
    """A memory reference matched nothing (or more than one memory), or a memory that was forgotten."""


class ShareError(EngramError):
    """Sharing through git failed: a remote that cannot be reached or holds no Engram data, a
    rejected push that did not settle, objects that do not match their names."""
