"""Fixtures for tests that make real sandboxes (root, namespaces, crun)."""

from __future__ import annotations

from backend_fixtures import backend, backend_factory, data_dir, make_sandbox, template

__all__ = ["backend", "backend_factory", "data_dir", "make_sandbox", "template"]
