"""Settings from `initializationOptions` and `workspace/configuration` (section "engram")."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields, replace
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    lenses: bool = True
    hover: bool = True
    editor_tape: bool = True
    window_before: int = 3
    window_after: int = 3
    min_confidence: float = 0.5
    mcp: bool = True
    debounce: float = 0.4
    note_diagnostics: bool = True  # drifted notes as hint diagnostics (docs/memories.md, "In the editor")
    note_drift_below: float = 0.8  # an `edited` note is a diagnostic below this share retained
    log_to_client: bool = False  # also send engram's log records to the client (window/logMessage)
    extra: dict[str, Any] = field(default_factory=dict)

    def merged(self, raw: Any) -> "Settings":
        """These settings overlaid with a client's dict (camelCase or snake_case keys); bad values are ignored."""
        if not isinstance(raw, dict):
            return self
        flat: dict[str, Any] = {}
        for key, value in raw.items():
            k = "".join("_" + c.lower() if c.isupper() else c for c in str(key))
            if k == "window" and isinstance(value, dict):
                for wk in ("before", "after"):
                    if wk in value:
                        flat[f"window_{wk}"] = value[wk]
            elif k == "mcp" and isinstance(value, dict):
                flat["mcp"] = value.get("enabled", True)
            else:
                flat[k] = value
        changes: dict[str, Any] = {}
        for f in fields(self):
            if f.name in flat and f.name != "extra":
                want = type(getattr(self, f.name))
                try:
                    changes[f.name] = want(flat[f.name]) if want is not bool else bool(flat[f.name])
                except (TypeError, ValueError):
                    log.warning("ignoring setting %s=%r", f.name, flat[f.name])
        return replace(self, **changes)
