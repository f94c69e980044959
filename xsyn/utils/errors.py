"""The root of xsyn's own errors: something the user gave cannot work, and the message says what and how to fix it.

Every error class xsyn raises for a bad setting, file, folder, model or data derives from `XsynError`
(and, for callers that catch the builtin kind, from `ValueError` or `OSError` as well). The command
line shows these as one-line messages; any other exception is a bug and keeps its traceback.
"""


class XsynError(Exception):
    """A setting, file, folder, model or data set the user gave cannot work; the message names it and the fix."""


class InputError(XsynError, ValueError):
    """A value the user gave (an option, a model, a data set) cannot work."""


class MissingInputError(XsynError, FileNotFoundError):
    """A file, folder or model the user named is not there, or not what it should be."""


def first_line(err: BaseException) -> str:
    """A library's error on one line: its first, which says what failed (Hugging Face appends paragraphs
    of advice that would break a one-line message)."""
    return next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)


class OptionError(InputError):
    """Settings that are missing or contradict each other, as given (options, a settings file): the command
    line shows it as a usage error (exit status 2), as it shows an unknown option."""
