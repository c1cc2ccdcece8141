"""Registries: every interchangeable method of pucl is looked up by name in one of them.

A registry is filled by a decorator on the method's class or function, keyed by a name
given once in the decorator, so the name users write in params.yaml cannot drift from
the code. Each entry may declare a pydantic model of its own settings; params.yaml holds
them in a sub-section named after the entry (`prior.km`, `pretrain.ncpu`, ...).

A registry knows its package and imports every module in it on first lookup, so adding a
method is one new module in that package (plus its tests and a docs line): no list to
extend anywhere else.
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from pucl.errors import ParamsError, did_you_mean, invalid_settings


class EntryParams(BaseModel):
    """Base of an entry's own settings: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


_SENTENCE_END = re.compile(r"(?<!\bal)(?<!\be\.g)(?<!\bi\.e)\.(?=\s|$)")


def first_sentence(text: str) -> str:
    """The first sentence of a text's first paragraph, on one line: what a listing shows
    (a docstring's summary, a preset's description), whole, however it was wrapped."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    end = _SENTENCE_END.search(paragraph)
    return paragraph[:end.end()] if end else paragraph


@dataclass(frozen=True)
class Entry:
    name: str
    target: Any  # the registered class or function
    params: type[EntryParams] | None  # its settings, None when it has none
    params_key: str | None  # the params.yaml sub-section holding them
    tags: frozenset[str]  # free-form facts other code asks about (e.g. "needs_prior")

    @property
    def summary(self) -> str:
        return first_sentence(getattr(self.target, "__doc__", None) or "")

    def accepts(self, name: str) -> bool:
        """Whether the target takes a keyword argument `name` (e.g. `prior`)."""
        return name in inspect.signature(self.target).parameters

    def build(self, settings: EntryParams | None = None, **context: Any) -> Any:
        """The target called with its settings and those `context` values (random_state,
        prior, ...) its signature names; entries sharing a sub-section take what they use."""
        offered = {**(settings.model_dump() if settings is not None else {}), **context}
        return self.target(**{k: v for k, v in offered.items() if self.accepts(k)})

    def settings(self, raw: dict[str, Any] | None, where: str) -> EntryParams | None:
        """This entry's settings validated from their params.yaml sub-section."""
        if self.params is None:
            return None
        try:
            return self.params.model_validate(raw or {})
        except ValidationError as exc:
            raise invalid_settings(exc, self.params, where) from None


class Registry:
    """Named methods of one kind (`kind` names them in errors: "prior estimator")."""

    def __init__(self, kind: str, package: str):
        self.kind = kind
        self.package = package
        self._entries: dict[str, Entry] = {}
        self._loaded = False

    def register(self, name: str, *, params: type[EntryParams] | None = None,
                 params_key: str | None = None, tags: tuple[str, ...] = ()
                 ) -> Callable[[Any], Any]:
        """Decorator: file `target` under `name`; its settings live in params.yaml under
        `params_key` (default: the name) of its section."""
        def decorate(target: Any) -> Any:
            if name in self._entries and self._entries[name].target is not target:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            key = (params_key or name) if params is not None else None
            self._entries[name] = Entry(name, target, params, key, frozenset(tags))
            return target
        return decorate

    def _load(self) -> None:
        """Import every module of the package once, so that their decorators run."""
        if self._loaded:
            return
        self._loaded = True
        package = importlib.import_module(self.package)
        for module in pkgutil.iter_modules(package.__path__):
            if not module.name.startswith("_"):
                importlib.import_module(f"{self.package}.{module.name}")

    def get(self, name: str) -> Entry:
        self._load()
        try:
            return self._entries[name]
        except KeyError:
            raise ParamsError(f"unknown {self.kind} {name!r}{did_you_mean(name, self._entries)} "
                              f"(allowed: "
                              f"{', '.join(self.names())})") from None

    def names(self, pattern: str = "*", tag: str | None = None) -> list[str]:
        """Registered names matching a shell-style pattern (and carrying `tag`), sorted."""
        self._load()
        return sorted(n for n, e in self._entries.items()
                      if fnmatch.fnmatch(n, pattern) and (tag is None or tag in e.tags))

    def create(self, name: str, **kwargs: Any) -> Any:
        return self.get(name).target(**kwargs)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def entries(self) -> list[Entry]:
        return [self._entries[name] for name in self.names()]
