"""The programs in examples/ run as a reader runs them, against a real server: each
framework's own client or tool interface, a scripted model, real sandboxes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def run_example(name: str, env: dict[str, str]) -> list[str]:
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout.splitlines()


def test_openai_example_plots_in_a_sandbox(client_env: dict[str, str]) -> None:
    """Chat Completions: create, run_code with a chart (its image sent back as a user
    message of image_url parts), kill, answer."""
    lines = run_example("openai_agent.py", client_env)
    assert lines[0].startswith("tool: Created sandbox ")
    assert "y(5) = 25" in "\n".join(lines)
    assert "images: 1" in lines
    assert lines[-2].startswith("tool: Killed sandbox ")
    assert lines[-1] == "answer: y(5) = 25; the chart is above."


def test_anthropic_example_restores_a_checkpoint(client_env: dict[str, str]) -> None:
    """Messages API: write, checkpoint, break, restore, read back, kill."""
    lines = run_example("anthropic_agent.py", client_env)
    assert lines[0].startswith("tool: Created sandbox ")
    assert any(line.startswith("tool: Saved checkpoint ") for line in lines)
    assert "tool: keep me" in lines
    assert lines[-1] == "answer: Restored; notes.txt reads 'keep me'."


def test_langchain_example_calls_tools_and_reports_a_mistake(
        client_env: dict[str, str]) -> None:
    """LangChain tools through ainvoke: results as ToolMessages, a wrong argument as a
    ToolMessage with status error and one line."""
    lines = run_example("langchain_agent.py", client_env)
    assert lines[0].startswith("tool (success): Created sandbox ")
    assert lines[1] == "tool (success): exit code 0"
    assert lines[3] == "tool (error): run_command: command must be a string, got 42"
    assert lines[4].startswith("tool (success): Killed sandbox ")
