"""Running a suite of great-expectations (1.x) checks on a pandas frame, in an ephemeral
context, and turning the outcome into plain data and one readable line."""

from __future__ import annotations

import functools
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pucl.errors import PuclError
from pucl.runtime.environment import quiet_defaults

quiet_defaults()  # before great-expectations is imported: its analytics off


class ValidationFailed(PuclError):
    """A data contract between stages does not hold (exit code 2, like other bad input)."""

    def __init__(self, report: SuiteReport):
        self.report = report
        super().__init__(report.one_line())


@dataclass(frozen=True)
class Check:
    """One expectation on one frame of the suite: the GX expectation class name (without
    the module) and its keyword arguments; `frame` names which frame it runs on."""

    expectation: str
    frame: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    why: str = ""


@dataclass
class CheckResult:
    expectation: str
    frame: str
    column: str | None
    success: bool
    why: str
    observed: Any = None
    unexpected: list[Any] = field(default_factory=list)

    def describe(self) -> str:
        where = f"{self.frame}.{self.column}" if self.column else self.frame
        detail = []
        if self.observed is not None:
            detail.append(f"observed {_short(self.observed)}")
        if self.unexpected:
            detail.append(f"offending values {_short(self.unexpected[:5])}")
        text = f"{_snake(self.expectation)}({where})"
        if self.why:
            text += f" [{self.why}]"
        return text + (": " + ", ".join(detail) if detail else "")


@dataclass
class SuiteReport:
    suite: str
    results: list[CheckResult]

    @property
    def success(self) -> bool:
        return all(r.success for r in self.results)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if not r.success]

    def one_line(self) -> str:
        failed = self.failures
        if not failed:
            return f"validation suite '{self.suite}' passed ({len(self.results)} expectations)"
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return f"validation suite '{self.suite}' failed: {failed[0].describe()}{more}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite, "success": self.success,
            "evaluated": len(self.results), "failed": len(self.failures),
            "results": [{"expectation": _snake(r.expectation), "frame": r.frame,
                         "column": r.column, "success": r.success, "why": r.why,
                         "observed": _plain(r.observed),
                         "unexpected": [_plain(v) for v in r.unexpected[:20]]}
                        for r in self.results],
        }


def _snake(name: str) -> str:
    out = []
    for ch in name:
        if ch.isupper() and out:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def _plain(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()
        except (ValueError, TypeError):
            pass
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return "nan"
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _short(value: Any) -> str:
    value = _plain(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if isinstance(value, dict):  # an offending row named by its index columns
        return " ".join(f"{k}={_short(v)}" for k, v in value.items())
    return str(value)


_GX_LOCK = threading.Lock()  # one suite at a time: the threads of a flow share the context


@functools.cache
def _context():
    """One ephemeral GX context per process (nothing is written to disk)."""
    import logging

    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


@functools.cache
def _batch_definition(frame_name: str):
    """The whole-dataframe batch definition of `frame_name` in the process's one pandas
    source, made once: each source, asset and definition GX adds rewrites its project
    config (about 15 ms a change, most of a small suite's time), while a batch takes its
    frame when it is validated."""
    return _source().add_dataframe_asset(frame_name).add_batch_definition_whole_dataframe(
        "all")


@functools.cache
def _source():
    return _context().data_sources.add_pandas(f"pucl-{uuid.uuid4().hex[:8]}")


def run_suite(name: str, frames: dict[str, pd.DataFrame], checks: list[Check],
              index: dict[str, list[str]] | None = None) -> SuiteReport:
    """Validate every frame against the checks that name it; one report for the suite.
    `index` names, per frame, the columns that identify an offending row (a long frame of
    name/value rows): its failures then list those rows, not bare values."""
    import great_expectations as gx
    import great_expectations.expectations as gxe

    results: list[CheckResult] = []
    with _GX_LOCK:
        for frame_name, frame in frames.items():
            mine = [c for c in checks if c.frame == frame_name]
            if not mine:
                continue
            batch = _batch_definition(frame_name).get_batch(
                batch_parameters={"dataframe": frame})
            suite = gx.ExpectationSuite(name=f"{name}.{frame_name}.{uuid.uuid4().hex[:8]}")
            for check in mine:
                suite.add_expectation(getattr(gxe, check.expectation)(**check.kwargs))
            names = (index or {}).get(frame_name) or []
            outcome = batch.validate(suite, result_format=_result_format(names))
            # GX reorders results; match them back to our checks by type and kwargs.
            for check, res in zip(mine, _ordered(mine, outcome.results), strict=True):
                detail = res.result or {}
                unexpected = ([{**{k: row[k] for k in names}, **row}  # the names first
                               for row in detail.get("partial_unexpected_index_list") or []]
                              or detail.get("partial_unexpected_list") or [])
                results.append(CheckResult(
                    check.expectation, frame_name, check.kwargs.get("column"),
                    bool(res.success), check.why, detail.get("observed_value"),
                    list(unexpected)))
    return SuiteReport(name, results)


def _result_format(index: list[str]) -> str | dict:
    """BASIC (observed values and the first offending values) costs GX about a third less
    than SUMMARY; SUMMARY is needed only to name offending rows by their index columns."""
    if not index:
        return "BASIC"
    return {"result_format": "SUMMARY", "unexpected_index_column_names": list(index)}


def _ordered(checks: list[Check], results: list) -> list:
    remaining = list(results)
    ordered = []
    for check in checks:
        snake = _snake(check.expectation)
        for i, res in enumerate(remaining):
            config = res.expectation_config
            if config.type == snake and all(
                    _same(config.kwargs.get(k), v) for k, v in check.kwargs.items()):
                ordered.append(remaining.pop(i))
                break
        else:
            raise RuntimeError(f"no GX result for {snake} {check.kwargs}")
    return ordered


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) if not isinstance(b, (list, set, tuple)) else list(a) == list(b)
    except Exception:
        return False


def enforce(report: SuiteReport) -> SuiteReport:
    """Raise ValidationFailed (one line) when the suite failed; return it otherwise."""
    if not report.success:
        raise ValidationFailed(report)
    return report
