"""Errors a user can cause. The CLI and stages print them as one line and exit 2."""


class PuclError(Exception):
    """A problem with the user's input (params, data, files): exit code 2."""

    exit_code = 2


class ParamsError(PuclError):
    """An invalid or unknown parameter."""


class DataError(PuclError):
    """Missing, unreadable or inconsistent data."""
