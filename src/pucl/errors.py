"""Errors a user can cause. The CLI and stages print them as one line and exit 2, with
the traceback above it when PUCL_DEBUG=1."""

import errno
import os
import re

DEBUG_ENV = "PUCL_DEBUG"


def debugging() -> bool:
    """PUCL_DEBUG is set (not empty or 0): show tracebacks of user errors too."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


class PuclError(ValueError):
    """A problem with the user's input (params, data, files): exit code 2. A ValueError,
    as scikit-learn's conventions want of a bad parameter or bad data."""

    exit_code = 2


class ParamsError(PuclError):
    """An invalid or unknown parameter."""


class DataError(PuclError):
    """Missing, unreadable or inconsistent data."""


class DiskFull(PuclError):
    """The disk filled up during a write. pucl writes each file whole or not at all
    (pucl.io.atomic_path), so what was written before is intact."""


NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def disk_full(exc: BaseException | None) -> DiskFull | None:
    """A DiskFull for `exc` when it, or an error it was raised from or during, is a full
    disk (libraries such as torch and DVC wrap the OSError in errors of their own)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in NO_SPACE:
            where = f" writing {exc.filename}" if exc.filename else ""
            return DiskFull(f"no space left on the device{where} ({os.strerror(exc.errno)}); "
                            "free some space and run it again: the files written before "
                            "are intact, and no file is half-written")
        exc = exc.__cause__ or exc.__context__
    return None


def did_you_mean(name: object, allowed, prefix: str = "") -> str:
    """'; did you mean 'x'?' for the closest allowed name (spelt `prefix` + name), or ''
    when none is close."""
    import difflib

    close = difflib.get_close_matches(str(name), list(allowed), n=1)
    return f"; did you mean '{prefix}{close[0]}'?" if close else ""


def unknown_parameter(key: str, allowed, also: str = "") -> str:
    """The one-line message for a misspelt or unknown params key; the suggestion is spelt
    as the key was ('pretrain.temperature', not 'temperature')."""
    allowed = list(allowed)
    section, _, name = key.rpartition(".")
    return (f"unknown parameter '{key}'"
            f"{did_you_mean(name, allowed, f'{section}.' if section else '')} "
            f"(allowed here: {', '.join(allowed)}{also})")


def _names_at(model, loc: tuple) -> list[str]:
    """The field names allowed at the parent of `loc` in a pydantic model, for hints."""
    for key in loc[:-1]:
        field = model.model_fields.get(str(key))
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and hasattr(annotation, "model_fields")):
            return []
        model = annotation
    return list(model.model_fields)


_UNION_TAG = re.compile(r"^(constrained-[a-z]+|literal\[.*\])$")


def invalid_settings(exc, model, where: str = "", source: str = "") -> ParamsError:
    """The first problem of a pydantic ValidationError of `model` as the one-line
    ParamsError every params-shaped input gets (params.yaml, a method's settings, a
    sweep file, the estimator's settings): the dotted key under `where`, the value and
    what is allowed; `source` (a file) leads the line."""
    error = exc.errors()[0]
    # a setting of two kinds (a number or `auto`) names the kind it failed as in its
    # location ('val_fraction', 'constrained-float'): the setting is what a user wrote
    loc = tuple(part for part in error["loc"] if not _UNION_TAG.match(str(part)))
    key = ".".join(str(part) for part in ((where,) if where else ()) + loc)
    message = error["msg"].removeprefix("Value error, ")
    if not loc:  # a rule across fields: its message names them
        text = message
    elif error["type"] == "extra_forbidden":
        text = unknown_parameter(key, _names_at(model, loc))
    elif message.startswith("unknown parameter '"):  # a misspelt field of a method section
        text = (message.replace("unknown parameter '", f"unknown parameter '{key}.", 1)
                .replace("did you mean '", f"did you mean '{key}.", 1))
    elif isinstance(error.get("input"), dict):  # a rule across fields of one section
        text = f"invalid section '{key}': {message}"
    else:
        text = f"invalid parameter '{key}' = {error.get('input')!r}: {message}"
    return ParamsError(f"{source}: {text}" if source else text)


def look_up(table, name: str, kind: str):
    """table[name], or a ParamsError naming the unknown `kind` and what is allowed."""
    try:
        return table[name]
    except KeyError:
        raise ParamsError(f"unknown {kind} '{name}' (allowed: {', '.join(sorted(table))})"
                          ) from None
