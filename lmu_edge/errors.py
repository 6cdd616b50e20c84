"""Exceptions raised by lmu-edge.

Every error is an :class:`LmuEdgeError` and also subclasses the matching
built-in exception, so ``except ValueError`` keeps working for callers who do
not know this package. Messages say what is wrong, where, and what to do.
"""


def _one_line(message: str) -> str:
    """Escape line breaks and other control characters: a message is always one line, whatever a
    model file put into the names it quotes."""
    if message.isprintable():
        return message
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


class LmuEdgeError(Exception):
    """Base class of every error raised on purpose by lmu-edge.

    The message is always one printable line: names quoted from a model file cannot break it up or
    smuggle terminal escape sequences into a user's console.
    """

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], str):
            args = (_one_line(args[0]),)
        super().__init__(*args)


class IRFormatError(LmuEdgeError, ValueError):
    """An IR file (or model file) is malformed, truncated or of an unknown version."""


class ModelFormatError(LmuEdgeError, ValueError):
    """A model file cannot be read (not the format its suffix claims, or damaged)."""


class UnsupportedLayerError(LmuEdgeError, ValueError):
    """A source model holds a layer or an option this converter does not support."""


class ShapeError(LmuEdgeError, ValueError):
    """Array shapes disagree with each other or with the model."""


class FoldError(LmuEdgeError, ValueError):
    """No realization meets the requested error budget."""


class QuantizationError(LmuEdgeError, ValueError):
    """Quantization cannot be done as requested (missing calibration data, ...)."""


class MissingDependencyError(LmuEdgeError, ImportError):
    """An optional dependency (an extra) is not installed."""


class OutputExistsError(LmuEdgeError, FileExistsError):
    """The output directory exists and is not empty."""


class OutputNotWritableError(LmuEdgeError, PermissionError):
    """The output's place cannot be written (permissions, a read-only file system, a full disk)."""


class ArtifactError(LmuEdgeError, ValueError):
    """An artifact directory is missing, incomplete or of an unknown target."""


class DeviceFitError(ArtifactError):
    """The artifact does not fit the flash or RAM of the ``device`` it was made for; ``problems`` says
    what exceeds it, by how much."""

    def __init__(self, message: str, problems: str = ""):
        super().__init__(message)
        self.problems = problems


class VerificationError(LmuEdgeError, AssertionError):
    """An artifact's output differs from the reference beyond the tolerance."""


class LimitError(LmuEdgeError, ValueError):
    """An input exceeds a documented limit (size, depth, name pattern): see docs/security.md."""


def os_refusal(e: OSError):
    """What to do about an operating system's refusal the user can fix (permissions, a read-only file
    system, a full disk), or None for any other ``OSError``."""
    import errno

    return {
        errno.EACCES: "check the permissions there or choose another path",
        errno.EPERM: "check the permissions there or choose another path",
        errno.EROFS: "the file system is read-only; choose another path",
        errno.ENOSPC: "the disk is full; free space or choose another path",
        errno.EDQUOT: "the disk quota is used up; free space or choose another path",
    }.get(e.errno or 0)
