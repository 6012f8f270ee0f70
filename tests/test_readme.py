"""The README's API example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: object) -> None:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"## Python API\n\n```python\n(.*?)```", text, re.S)
    assert block is not None
    namespace: dict[str, object] = {}
    exec(compile(block.group(1), "README.md", "exec"), namespace)
    assert namespace["a"] == namespace["b"]


def test_readme_commands_match_ci() -> None:
    text = README.read_text(encoding="utf-8")
    ci = (README.parent / ".ci" / "run").read_text()
    test_command = re.findall(r"&& (\.venv/bin/python -m pytest[^\n]*)\n", text)
    assert test_command and test_command[0] in ci
