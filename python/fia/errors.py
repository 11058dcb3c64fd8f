"""Exceptions of the fia package: fia's Status (FIA-SPEC 2.4) as Python exceptions.

Every error names the torch_npu parameter at fault (``parameter``) and says what was expected and
what was given (``message``), exactly as the C++ library's ``fia::Status`` does.

- :class:`InvalidArgumentError` (a ``ValueError``): a validation rule of FIA-SPEC 20 is broken.
- :class:`DtypeError` (a ``TypeError``): an input has a dtype the rule does not allow.
- :class:`ArgumentTypeError` (a ``TypeError``): an attribute of the wrong Python type (a str
  for ``num_heads``, a float in ``actual_seq_lengths``).
- :class:`UnsupportedFeatureError` (a ``NotImplementedError``): a valid request fia does not
  implement yet.
"""
import re

from . import _C

__all__ = ["FiaError", "InvalidArgumentError", "DtypeError", "ArgumentTypeError", "UnsupportedFeatureError"]


class FiaError(Exception):
    """Base class: ``parameter`` (torch_npu name, may be empty), ``message`` and ``code``."""

    def __init__(self, code: str, parameter: str, message: str):
        self.code = code
        self.parameter = parameter
        self.message = message
        super().__init__(f"{parameter}: {message}" if parameter else message)


class InvalidArgumentError(FiaError, ValueError):
    """A value, shape or combination of arguments FIA rejects (aclnn 161001 / 161002)."""


class DtypeError(FiaError, TypeError):
    """An input whose dtype FIA does not accept for that parameter (aclnn 161002)."""


class ArgumentTypeError(FiaError, TypeError):
    """An attribute of the wrong Python type, e.g. a str for num_heads."""


class UnsupportedFeatureError(FiaError, NotImplementedError):
    """A valid FIA request for a feature fia does not implement yet."""


class InternalError(FiaError, RuntimeError):
    """A bug or a resource failure inside fia."""


_DTYPE_WORD = re.compile(r"\bdtypes?\b")


def from_status(code: str, parameter: str, message: str) -> FiaError:
    """The exception for a failed fia::Status given as (code name, parameter, message)."""
    if code == "unsupported":
        return UnsupportedFeatureError(code, parameter, message)
    if code == "internal error":
        return InternalError(code, parameter, message)
    # The library words every dtype rule with "dtype" (tests/python/test_errors.py checks the
    # rules users hit most); everything else is a value error.
    if _DTYPE_WORD.search(message):
        return DtypeError(code, parameter, message)
    return InvalidArgumentError(code, parameter, message)


def raise_from(err: "_C.StatusError") -> None:
    """Re-raises a _C.StatusError as the matching FiaError subclass."""
    raise from_status(*err.args) from None
