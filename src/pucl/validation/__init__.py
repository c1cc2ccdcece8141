"""Data contracts between stages: great-expectations suites as code (see suites.py)."""

from pucl.validation import suites
from pucl.validation.engine import Check, SuiteReport, ValidationFailed, enforce, run_suite

__all__ = ["Check", "SuiteReport", "ValidationFailed", "enforce", "run_suite", "suites"]
