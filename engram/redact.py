"""Secret redaction applied to every string of every event before anything is written.

(Placeholder with the interface; the full pattern set lands in its own commit.)
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

REPLACEMENT = "[REDACTED:{name}]"


class Redactor:
    """Replaces secrets in text with `[REDACTED:<class>]` and counts them by class."""

    def __init__(self, extra: list[dict[str, str]] | None = None) -> None:
        self.counts: Counter[str] = Counter()
        self._patterns: list[tuple[str, re.Pattern[str]]] = [
            ("aws-access-key-id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
        ]
        for item in extra or []:
            self._patterns.append((str(item["name"]), re.compile(str(item["pattern"]))))

    def text(self, s: str) -> str:
        for name, pat in self._patterns:
            s, n = pat.subn(REPLACEMENT.format(name=name), s)
            if n:
                self.counts[name] += n
        return s

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        return v

    def event(self, ev: dict[str, Any]) -> dict[str, Any]:
        return self.value(ev)
