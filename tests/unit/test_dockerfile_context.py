"""The build context: .dockerignore rules, what a COPY selects, its files hash and upload."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from bac import DockerfileError, InvalidArgumentError, Template
from bac._template._build import prepare_copies
from bac._template._dockerignore import IgnoreRules, read_patterns
from bac._template._files import files_hash, pack, select


@pytest.fixture
def context(tmp_path: Path) -> Path:
    """A small project: sources, a build dir, secrets, nested docs."""
    for name, text in {
        "app.py": "print('app')\n", "util.py": "x = 1\n", "README.md": "readme\n",
        "build/out.o": "obj", "build/keep.txt": "keep", ".env": "SECRET=1",
        "docs/a.md": "a", "docs/deep/b.md": "b", "src/main.c": "int main;",
    }.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "run.sh").chmod(0o755)
    os.symlink("app.py", tmp_path / "link.py")
    return tmp_path


def names(context: Path, src: str, patterns: list[str] | None = None) -> list[str]:
    return [item.relative for item in select(context, src, IgnoreRules(patterns or []))]


@pytest.mark.parametrize(("patterns", "path", "ignored"), [
    (["*.md"], "README.md", True),
    (["*.md"], "docs/a.md", False),  # * stays within one segment, anchored at the root
    (["**/*.md"], "docs/deep/b.md", True),
    (["**/*.md"], "README.md", True),
    (["docs"], "docs/deep/b.md", True),  # a matched directory hides what it holds
    (["/build/"], "build/out.o", True),
    (["build", "!build/keep.txt"], "build/keep.txt", False),
    (["build", "!build/keep.txt"], "build/out.o", True),
    (["!app.py", "*.py"], "app.py", True),  # the last matching pattern decides
    (["?til.py"], "util.py", True),
    (["[a-c]pp.py"], "app.py", True),
    (["[^a]pp.py"], "app.py", False),
    (["[!a]pp.py"], "app.py", True),  # Docker's classes negate with ^ only: ! is a character
    (["# comment", "", "  .env  "], ".env", True),
    (["  # no comment"], "# no comment", True),  # only a # at the line's start is one
    (["./src/../src/*.c"], "src/main.c", True),
])
def test_ignore_rules(patterns: list[str], path: str, ignored: bool) -> None:
    """Docker's .dockerignore matching: anchored, segment-wise, exceptions, last wins."""
    assert IgnoreRules(patterns).ignored(path) is ignored


@pytest.mark.parametrize("pattern", ["[abc", "!"])
def test_malformed_patterns_are_errors(pattern: str) -> None:
    """A malformed ignore pattern (an unterminated class, a lone !) is reported, not
    silently matched."""
    with pytest.raises(InvalidArgumentError, match="Invalid ignore pattern"):
        IgnoreRules([pattern])


def test_excluded_directories_are_walked_only_where_an_exception_may_apply() -> None:
    """An excluded directory is entered only if a !pattern may re-include something in it."""
    rules = IgnoreRules(["build", "docs", "src", "!build/keep.txt", "!docs/*/*.md"])
    assert rules.may_keep_under("build") and rules.may_keep_under("docs")
    assert not rules.may_keep_under("src")
    assert not IgnoreRules(["build", "!docs/a.md"]).may_keep_under("build")


def test_read_patterns_prefers_the_dockerfile_specific_file(context: Path) -> None:
    """Dockerfile.dockerignore beats .dockerignore; extra patterns come last."""
    (context / ".dockerignore").write_text("*.md\n")
    specific = context / "Dockerfile.dockerignore"
    specific.write_text("\ufeffbuild\n")
    assert read_patterns(context, ["x"]) == ["*.md", "x"]
    assert read_patterns(context, [], specific) == ["build"]
    assert read_patterns(context / "docs", ["y"]) == ["y"]


def test_select_files_dirs_globs_and_links(context: Path) -> None:
    """A file, a directory (recursively), a glob and the whole context, minus ignores (a
    re-included file inside an ignored directory comes without the directory's entry);
    symlinks are entries of their own."""
    assert names(context, "app.py") == ["app.py"]
    assert names(context, "docs") == ["docs", "docs/a.md", "docs/deep", "docs/deep/b.md"]
    assert names(context, "*.py") == ["app.py", "link.py", "util.py"]
    assert names(context, "docs/*.md") == ["docs/a.md"]
    everything = names(context, ".", [".env", "build", "!build/keep.txt", "docs/deep"])
    assert everything == ["README.md", "app.py", "build/keep.txt", "docs",
                          "docs/a.md", "link.py", "run.sh", "src", "src/main.c", "util.py"]


def test_select_errors_name_the_source(context: Path) -> None:
    """A missing source, an empty glob and an ignored file are each explained."""
    from bac._template._errors import Origin

    with pytest.raises(DockerfileError) as missing:
        select(context, "nope.txt", IgnoreRules([]), Origin("Dockerfile", 4))
    assert str(missing.value) == (
        f"Dockerfile:4: COPY source 'nope.txt' not found in the context {context}")
    with pytest.raises(DockerfileError, match=r"'\*.rs' matches no file"):
        select(context, "*.rs", IgnoreRules([]))
    with pytest.raises(DockerfileError, match=r"'.env' is excluded by .dockerignore"):
        select(context, ".env", IgnoreRules([".env"]))
    with pytest.raises(DockerfileError, match=r"'\[ab' has an unterminated \["):
        select(context, "[ab", IgnoreRules([]))


def test_source_wildcards_match_as_buildkit(context: Path) -> None:
    """A source's wildcards are Go's filepath.Match: per segment, [^...] negates, [!...] is
    a class holding !."""
    assert names(context, "[^a]*.py") == ["link.py", "util.py"]
    assert names(context, "[!a]*.py") == ["app.py"]
    assert names(context, "*/*.md") == ["docs/a.md"]


def test_files_hash_tracks_content_mode_and_paths(context: Path) -> None:
    """The hash changes with content, mode, file names, destination and link targets, and
    not with modification times."""
    def digest(dest: str = "/app/") -> str:
        return files_hash("docs", dest, select(context, "docs", IgnoreRules([])))

    first = digest()
    assert len(first) == 64 and first == first.lower()
    os.utime(context / "docs/a.md", (1, 1))
    assert digest() == first
    assert digest("/other/") != first
    (context / "docs/a.md").write_text("changed")
    changed = digest()
    assert changed != first
    (context / "docs/a.md").chmod(0o600)
    assert digest() != changed
    (context / "docs/a.md").rename(context / "docs/c.md")
    assert digest() not in (first, changed)
    link = select(context, "link.py", IgnoreRules([]))
    before = files_hash("link.py", "/", link)
    (context / "link.py").unlink()
    os.symlink("util.py", context / "link.py")
    assert files_hash("link.py", "/", select(context, "link.py", IgnoreRules([]))) != before


def test_pack_holds_exactly_the_selection_owned_by_root(context: Path) -> None:
    """The upload is a tar.gz of the selected entries at their context-relative paths,
    modes kept, owners zeroed, links as links."""
    selected = select(context, ".", IgnoreRules(["build", "docs", ".env", "src"]))
    with pack(selected) as spool, tarfile.open(fileobj=io.BytesIO(spool.read()),
                                               mode="r:gz") as archive:
        members = {m.name: m for m in archive.getmembers()}
        assert sorted(members) == ["README.md", "app.py", "link.py", "run.sh", "util.py"]
        assert members["run.sh"].mode & 0o777 == 0o755
        assert members["link.py"].issym() and members["link.py"].linkname == "app.py"
        assert {(m.uid, m.gid, m.uname) for m in members.values()} == {(0, 0, "")}
        extracted = archive.extractfile("app.py")
        assert extracted is not None and extracted.read() == b"print('app')\n"


def test_prepare_copies_uses_the_templates_ignore_files(context: Path) -> None:
    """Each COPY step of a template gets its hash from its own selection, honouring the
    context's .dockerignore and the template's extra patterns."""
    (context / ".dockerignore").write_text("build\n")
    template = (Template(context=context, ignore=["docs/deep"])
                .copy(".", "/app/").run("true").copy(["docs", "app.py"], "/x/"))
    copies = prepare_copies(template)
    assert sorted(copies) == [0, 2, 3]
    whole = [item.relative for item in copies[0][1]]
    assert "build" not in whole and "docs/deep" not in whole and ".dockerignore" in whole
    assert [item.relative for item in copies[2][1]] == ["docs", "docs/a.md"]
    assert copies[2][0] != copies[3][0]
