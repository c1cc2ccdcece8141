"""Errors a user can cause. The CLI and stages print them as one line and exit 2."""


class PuclError(ValueError):
    """A problem with the user's input (params, data, files): exit code 2. A ValueError,
    as scikit-learn's conventions want of a bad parameter or bad data."""

    exit_code = 2


class ParamsError(PuclError):
    """An invalid or unknown parameter."""


class DataError(PuclError):
    """Missing, unreadable or inconsistent data."""


def did_you_mean(name: object, allowed) -> str:
    """'; did you mean 'x'?' for the closest allowed name, or '' when none is close."""
    import difflib

    close = difflib.get_close_matches(str(name), list(allowed), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def unknown_parameter(key: str, allowed, also: str = "") -> str:
    """The one-line message for a misspelt or unknown params key."""
    allowed = list(allowed)
    return (f"unknown parameter '{key}'{did_you_mean(key.rsplit('.', 1)[-1], allowed)} "
            f"(allowed here: {', '.join(allowed)}{also})")
