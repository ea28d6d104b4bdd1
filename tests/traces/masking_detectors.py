"""Detectors that tests name in HARNESS_MASKING_DETECTORS (the documented interface)."""

import re

from traces.masking.plugins import PatternDetector


class ContractNumber:
    """A contract number ``K-`` + 7 digits whose last digit is the sum of the others mod 10."""

    kind = "contract_number"
    fingerprinted = True
    _pattern = re.compile(r"(?<![A-Za-z0-9])K-(\d{7})(?![A-Za-z0-9])")

    def find(self, text):
        for match in self._pattern.finditer(text):
            yield match.span()

    def check(self, value):
        digits = value[2:]
        return sum(map(int, digits[:-1])) % 10 == int(digits[-1])

    def normalize(self, value):
        return value.upper()

    def mask(self, value, digest):
        return f"K-******{value[-1]} [{digest[:6]}]"


EMPLOYEE_ID = PatternDetector("employee_id", re.compile(r"\bEMP(\d{6})\b"))


def make_phone_detector():
    """A factory returning a detector of a built-in kind: masked like any phone."""
    return PatternDetector("phone", re.compile(r"\bPHONE#(\d{10})\b"))


NOT_A_DETECTOR = object()
