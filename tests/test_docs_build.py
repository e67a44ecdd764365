"""The documentation site builds in strict mode: every page, link, anchor and API reference
resolves, and mkdocstrings accepts every docstring it renders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_mkdocs_build_is_strict_clean(tmp_path: Path) -> None:
    # mkdocs-material prints a banner about its successor on every build; it is noise here.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = (result.stdout + result.stderr)[-4000:]
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{output}"
    assert (tmp_path / "site" / "api" / "index.html").is_file()
