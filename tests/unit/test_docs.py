"""The README and docs/ cannot rot: every relative link resolves (file and heading), every
``make`` target they name exists in the Makefile, and every ``--flag`` given to a ``kubedra``
or ``kubectl dra`` command exists on that command.

Commands are read from fenced code blocks (a ``$ `` prompt stripped, backslash continuations
joined) and from inline code spans. Heading anchors are GitHub's: lower case, punctuation
other than ``-`` and ``_`` dropped, spaces turned into ``-``.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from kubedra.cli import kubectl_dra, main

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
INLINE = re.compile(r"`([^`\n]+)`")
COMMAND = re.compile(r"(?:^|[;&|(]\s*|\$\s)((?:kubectl dra|kubedra|make)\s[^;&|#>`]*)")


def anchors(page: Path) -> set[str]:
    """The heading anchors of ``page`` (headings inside code blocks do not count)."""
    text = FENCE.sub("", page.read_text())
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", text, re.M)}


def links(page: Path) -> list[str]:
    """Every link target of ``page`` outside code blocks."""
    return LINK.findall(FENCE.sub("", page.read_text()))


def command_lines(page: Path) -> list[str]:
    """Every ``kubedra``, ``kubectl dra`` and ``make`` command line of ``page``."""
    text = page.read_text()
    found: list[str] = []
    for block in FENCE.findall(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            found += [m.strip() for m in COMMAND.findall(line.strip())]
    for span in INLINE.findall(FENCE.sub("", text)):
        found += [m.strip() for m in COMMAND.findall(span)]
    return found


def make_targets() -> set[str]:
    """The rule names of the Makefile."""
    return set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), re.M))


def resolve(words: list[str]) -> tuple[click.Command, list[click.Command]]:
    """The click command that ``words`` (after ``kubedra`` or ``kubectl dra``) runs, and the
    commands on the way to it (their options apply too)."""
    command: click.Command = main if words[0] == "kubedra" else kubectl_dra
    words = words[1:] if words[0] == "kubedra" else words[2:]
    chain = [command]
    for word in words:
        if not isinstance(command, click.Group):
            break
        sub = command.get_command(click.Context(command), word)
        if sub is None:
            break
        command = sub
        chain.append(command)
    return command, chain


def options(chain: list[click.Command]) -> set[str]:
    """Every long option of the commands of ``chain``, ``--help`` included."""
    names = {"--help", "--version"}
    for command in chain:
        for param in command.params:
            names.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("--"))
    return names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT)}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_make_target_exists(page: Path) -> None:
    targets = make_targets()
    named = [line.split()[1].rstrip("),.:;") for line in command_lines(page)
             if line.startswith("make ") and len(line.split()) > 1]
    if page.name == "README.md":
        assert {"demo", "test", "venv"} <= set(named)
    assert sorted({t for t in named if "=" not in t and t not in targets}) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_cli_flag_exists(page: Path) -> None:
    unknown = []
    for line in command_lines(page):
        if line.startswith("make"):
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        command, chain = resolve(words)
        known = options(chain)
        for word in words:
            flag = word.split("=", 1)[0]
            if re.fullmatch(r"--[a-z][a-z0-9-]*", flag) and flag not in known:
                unknown.append(f"{line}: {flag} is no option of {command.name}")
    assert unknown == []


def test_a_broken_link_and_an_unknown_flag_are_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n[a](missing.md) [b](#title) [c](#nope)\n"
                    "```sh\nkubedra simulate -f c.yaml --no-such-flag\nmake demo KEEP=1\n```\n")
    assert links(page) == ["missing.md", "#title", "#nope"]
    assert anchors(page) == {"title"}
    assert command_lines(page) == ["kubedra simulate -f c.yaml --no-such-flag",
                                   "make demo KEEP=1"]
    command, chain = resolve(shlex.split(command_lines(page)[0]))
    assert command.name == "simulate"
    assert "--from" in options(chain)
    assert "--no-such-flag" not in options(chain)
