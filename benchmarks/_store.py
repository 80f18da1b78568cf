"""Resumable benchmark results: one JSON of finished units, each written as soon as it ends.

``ResumableResults(path, config, markdown)`` loads ``path`` if it exists (a restart), and
:meth:`~ResumableResults.add` stores one finished unit with the package commit and the load
average, rewrites the JSON atomically (temporary file, then ``os.replace``, so a kill never
leaves half a file) and re-renders the Markdown beside it with ``markdown(results)``.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path


def package_commit() -> str:
    """``git rev-parse --short HEAD`` of the repository, or ``"unknown"``."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
            cwd=Path(__file__).resolve().parent,
        )  # fmt: skip
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class ResumableResults:
    """Finished units of a benchmark, keyed by a string, persisted after each one."""

    def __init__(self, path: Path, config: dict, markdown=None):
        self.path, self.markdown = Path(path), markdown
        if self.path.exists():
            self.data = json.loads(self.path.read_text())
            if self.data.get("config") != config:
                raise SystemExit(
                    f"{self.path} was made with another configuration ({self.data.get('config')}); "
                    "move it away or pass the same options"
                )
        else:
            self.data = {"config": config, "machine": platform.platform(), "units": {}}

    def done(self, key: str) -> bool:
        return key in self.data["units"]

    def add(self, key: str, row: dict) -> None:
        row = {**row, "commit": package_commit(), "loadavg": os.getloadavg()[0],
               "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}  # fmt: skip
        self.data["units"][key] = row
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=float))
        os.replace(tmp, self.path)
        if self.markdown is not None:
            md = self.path.with_suffix(".md")
            md.with_suffix(".md.tmp").write_text(self.markdown(self.data))
            os.replace(md.with_suffix(".md.tmp"), md)
