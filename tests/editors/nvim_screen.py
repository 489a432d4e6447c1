"""A real Neovim screen as a picture: Neovim runs in tmux (a real terminal UI), the screen is read
with `tmux capture-pane -e` and rendered to PNG by headless Chromium. Nothing is drawn by hand: the
PNG shows exactly the characters and colours Neovim put on the screen."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ansi_html import to_html  # noqa: E402

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--force-device-scale-factor=1"]


class Tmux:
    def __init__(self, socket: str, env: dict[str, str], cols: int = 150, rows: int = 42) -> None:
        self.socket, self.env, self.cols, self.rows = socket, env, cols, rows

    def run(self, *args: str, check: bool = True) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], env=self.env, check=check, capture_output=True,
                              text=True, timeout=30).stdout

    def start(self, command: list[str], cwd: Path) -> None:
        conf = Path(self.env["XDG_CONFIG_HOME"]) / "tmux.conf"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text('set -g default-terminal "xterm-256color"\nset -g status off\nset -sg escape-time 0\n')
        subprocess.run(["tmux", "-L", self.socket, "-f", str(conf), "new-session", "-d", "-s", "nv", "-x",
                        str(self.cols), "-y", str(self.rows), "-c", str(cwd), " ".join(shlex.quote(c) for c in command)],
                       env=self.env, check=True, timeout=30)

    def screen(self, escapes: bool = False) -> str:
        return self.run("capture-pane", "-p", "-t", "nv", *(["-e"] if escapes else []))

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "nv", *keys)

    def wait_for(self, text: str, timeout: float = 60) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if text in self.screen():
                return True
            time.sleep(0.2)
        return False

    def kill(self) -> None:
        self.run("kill-server", check=False)


def html_to_png(html_file: Path, png: Path, width: int, height: int, profile: Path, chromium: str = "chromium") -> None:
    subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                    f"--screenshot={png}", html_file.as_uri()], check=True, capture_output=True, timeout=120)


def save(tmux: Tmux, out: Path, title: str, profile: Path) -> None:
    """The screen as .txt (plain), .html and .png."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".txt").write_text(tmux.screen())
    html_file = out.with_suffix(".html")
    html_file.write_text(to_html(tmux.screen(escapes=True), title=title, cols=tmux.cols))
    # DejaVu Sans Mono at 14px: 8.43 px a column, 17.5 px a row, plus the 8 px padding.
    html_to_png(html_file, out, width=int(tmux.cols * 8.43) + 24, height=int(tmux.rows * 17.5) + 16, profile=profile)
