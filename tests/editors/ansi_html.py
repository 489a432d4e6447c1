"""Render a terminal capture (`tmux capture-pane -e`: text with SGR escape sequences) as HTML.

Only what a captured screen holds is handled: SGR colours (16, 256 and 24-bit), bold, italic,
underline, reverse. Used to turn a real Neovim screen into a screenshot (HTML → Chromium → PNG).
"""

from __future__ import annotations

import html
import re

BASE16 = ["#1e1e1e", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
          "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff"]
DEFAULT_FG, DEFAULT_BG = "#d4d4d4", "#1e1e1e"
SGR = re.compile(r"\x1b\[([0-9;:]*)m")
OTHER_ESC = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07|[()][A-Z0-9])")


def color256(n: int) -> str:
    if n < 16:
        return BASE16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[(n // 6) % 6], steps[n % 6])
    v = 8 + 10 * (n - 232)
    return "#%02x%02x%02x" % (v, v, v)


class Style:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.fg: str | None = None
        self.bg: str | None = None
        self.bold = self.italic = self.underline = self.reverse = False

    def apply(self, params: str) -> None:
        codes = [int(p) if p.isdigit() else 0 for p in re.split(r"[;:]", params)] if params else [0]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                self.reset()
            elif c == 1:
                self.bold = True
            elif c == 3:
                self.italic = True
            elif c == 4:
                self.underline = True
            elif c == 7:
                self.reverse = True
            elif c == 22:
                self.bold = False
            elif c == 23:
                self.italic = False
            elif c == 24:
                self.underline = False
            elif c == 27:
                self.reverse = False
            elif 30 <= c <= 37:
                self.fg = BASE16[c - 30]
            elif 90 <= c <= 97:
                self.fg = BASE16[c - 90 + 8]
            elif 40 <= c <= 47:
                self.bg = BASE16[c - 40]
            elif 100 <= c <= 107:
                self.bg = BASE16[c - 100 + 8]
            elif c == 39:
                self.fg = None
            elif c == 49:
                self.bg = None
            elif c in (38, 48) and i + 1 < len(codes):
                if codes[i + 1] == 5 and i + 2 < len(codes):
                    col = color256(codes[i + 2])
                    i += 2
                elif codes[i + 1] == 2 and i + 4 < len(codes):
                    col = "#%02x%02x%02x" % tuple(codes[i + 2:i + 5])
                    i += 4
                else:
                    col = None
                if c == 38:
                    self.fg = col
                else:
                    self.bg = col
            i += 1

    def css(self) -> str:
        fg, bg = self.fg or DEFAULT_FG, self.bg or DEFAULT_BG
        if self.reverse:
            fg, bg = bg, fg
        parts = [f"color:{fg}", f"background:{bg}"]
        if self.bold:
            parts.append("font-weight:bold")
        if self.italic:
            parts.append("font-style:italic")
        if self.underline:
            parts.append("text-decoration:underline")
        return ";".join(parts)


def to_html(capture: str, title: str = "terminal", cols: int = 160) -> str:
    style = Style()
    rows = []
    for line in capture.rstrip("\n").split("\n"):
        out = []
        pos = 0
        for m in SGR.finditer(line):
            text = OTHER_ESC.sub("", line[pos:m.start()])
            if text:
                out.append(f'<span style="{style.css()}">{html.escape(text)}</span>')
            style.apply(m.group(1))
            pos = m.end()
        text = OTHER_ESC.sub("", line[pos:])
        if text:
            out.append(f'<span style="{style.css()}">{html.escape(text)}</span>')
        rows.append("".join(out))
    body = "\n".join(rows)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ margin: 0; background: {DEFAULT_BG}; }}
pre {{ margin: 0; padding: 8px; font: 14px/1.25 "DejaVu Sans Mono", "Liberation Mono", monospace;
       color: {DEFAULT_FG}; background: {DEFAULT_BG}; width: {cols}ch; white-space: pre; }}
</style></head><body><pre>{body}</pre></body></html>
"""
