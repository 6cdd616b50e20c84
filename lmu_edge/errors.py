"""Exceptions raised by lmu-edge.

Every error is an :class:`LmuEdgeError` and also subclasses the matching
built-in exception, so ``except ValueError`` keeps working for callers who do
not know this package. Messages say what is wrong, where, and what to do.
"""


class LmuEdgeError(Exception):
    """Base class of every error raised on purpose by lmu-edge."""


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


class ArtifactError(LmuEdgeError, ValueError):
    """An artifact directory is missing, incomplete or of an unknown target."""


class VerificationError(LmuEdgeError, AssertionError):
    """An artifact's output differs from the reference beyond the tolerance."""


class LimitError(LmuEdgeError, ValueError):
    """An input exceeds a documented limit (size, depth, name pattern): see docs/security.md."""
