"""The package's exception types.

Every error a user can cause (a bad graph, a malformed file, an unsupported op, a missing
GPU) is raised as a subclass of :class:`MirageError` with a message that names the problem
and says what to change. Imports nothing of ours.
"""

from __future__ import annotations


class MirageError(Exception):
    """Base class of every error raised by mirage-formal."""


class GraphError(MirageError):
    """A graph is ill-formed: shapes, partitions, accumulators or tensors do not fit."""


class UnsupportedOpError(MirageError):
    """An op name (or Mirage op type) is not in the registry."""


class FormatError(MirageError):
    """A file or text (our JSON, our text form, Mirage's JSON) is malformed."""


class ResourceError(MirageError):
    """A data folder (axioms, search presets, device library) cannot be found."""


class DeadlinePassed(MirageError):
    """Work handed a deadline (``set_deadline``: the verifier's trials) stopped because it
    passed; nothing was decided (a check stopped so is never a pass)."""


class CacheWarning(UserWarning):
    """A cache entry (oracle decision, compiled kernel) failed its check and was dropped; the
    result is recomputed, never used."""
