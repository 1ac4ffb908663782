"""Fixtures for build engine tests, imported by each test_engine_* module: a real
NamespaceBackend (the Builder), a template store in the session's private data dir whose
``base`` is the machine's built one, and COPY uploads made by the official e2b SDK's own
functions (tar and files hash)."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from e2b.template.utils import calculate_files_hash, tar_file_stream

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backend"))

from backend_fixtures import backend, backend_factory, data_dir, make_sandbox, template
from backend_harness import SandboxFactory, data_dir_leftovers

from bac_server.backends.base import TemplateImage, TemplateNotFound
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.templates import BuildEngine, CopyStep, LogEntry, TemplateStore

__all__ = ["SandboxFactory", "backend", "backend_factory", "data_dir", "data_dir_leftovers",
           "make_sandbox", "template"]


def shared_base(data_dir: Path, template: TemplateImage) -> None:
    """Point the private data dir's ``templates/base`` at the machine's built base."""
    templates = data_dir / "templates"
    templates.mkdir(mode=0o700, parents=True, exist_ok=True)
    link = templates / "base"
    if not link.is_symlink():
        link.symlink_to(template.rootfs.parent.parent)


@pytest.fixture(scope="session")
def store(data_dir: Path, template: TemplateImage) -> TemplateStore:
    shared_base(data_dir, template)
    return TemplateStore(data_dir)


@pytest.fixture
def engine(store: TemplateStore, backend: NamespaceBackend) -> BuildEngine:
    return BuildEngine(store, backend)


@dataclass
class Uploads:
    """A build context on disk; ``copy`` makes a COPY step and its upload as the SDK does."""

    root: Path
    context: Path
    stored: dict[str, Path] = field(default_factory=dict)

    def write(self, name: str, text: str, mode: int = 0o644) -> None:
        path = self.context / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)

    def copy(self, src: str, dest: str, **options: object) -> CopyStep:
        files_hash = calculate_files_hash(src, dest, str(self.context), [], False, None)
        with tar_file_stream(src, str(self.context), [], False, True) as stream:
            target = self.root / f"{files_hash}.tar.gz"
            with open(target, "wb") as out:
                shutil.copyfileobj(stream, out)
        self.stored[files_hash] = target
        return CopyStep(src=src, dest=dest, files_hash=files_hash, **options)  # type: ignore[arg-type]

    def __call__(self, files_hash: str) -> Path:
        return self.stored[files_hash]


@pytest.fixture
def uploads(tmp_path: Path) -> Uploads:
    (tmp_path / "uploads").mkdir()
    (tmp_path / "context").mkdir()
    return Uploads(tmp_path / "uploads", tmp_path / "context")


@dataclass
class Log:
    entries: list[LogEntry] = field(default_factory=list)

    def __call__(self, entry: LogEntry) -> None:
        self.entries.append(entry)

    def at(self, step: str) -> list[str]:
        return [e.message for e in self.entries if e.step == step]

    def cached(self, step: str) -> bool:
        return any(m.endswith(" CACHED") for m in self.at(step))

    def made(self, step: str) -> bool:
        return any(m.startswith("done in ") for m in self.at(step))


async def no_templates(ref: str) -> TemplateImage:
    raise TemplateNotFound(f"template '{ref}' not found")


def unique() -> str:
    """A token that makes a recipe's first step (and so all its layers) new to the cache."""
    return f"{time.time_ns()}"


@pytest.fixture
def log() -> Iterator[Log]:
    yield Log()
