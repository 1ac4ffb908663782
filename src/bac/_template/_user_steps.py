"""The steps as the user wrote them, over the steps sent: what a build shows.

A recipe travels as E2B's build steps, which are not quite what was written: a ``COPY``
with several sources is one step per source (each with its own files hash), an ``ADD`` of
an archive is a COPY and a RUN, and a Dockerfile brings bookkeeping nobody wrote
(``USER root`` and ``WORKDIR /`` first, so steps start as Docker's do; ``USER user`` and
``WORKDIR /home/user`` last, E2B's defaults for the sandboxes). Each step sent says which
user's step it is part of (``TemplateStep.user_step``, ``None`` for bookkeeping), and
:class:`UserSteps` numbers those ``1``..``M`` and maps the server's log onto them:

* a line of a step sent is shown under its user's step; a line of bookkeeping under
  ``base`` (before the first user's step), ``finalize`` (after the last) or the user's
  step before it;
* the server begins each step sent with ``Step k/N: <step>`` (``k`` of ``N`` steps sent;
  ``bac_server.templates.build``). That line becomes ``Step n/M: <as written>`` for the
  first part of the user's step ``n`` (with the server's ``CACHED`` when it is the only
  part), plus the part's own line (``COPY b.txt /srv/ CACHED``) when it has several parts;
  a bookkeeping step's is dropped.

A user's step counts as cached when every part of it said ``CACHED``. Lines of other
servers, which begin no step that way, keep their text and get the step mapping only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from bac._template._errors import Origin
from bac._template._models import BuildLogEntry
from bac._template._steps import TemplateStep

_CACHED = " CACHED"


@dataclass(frozen=True)
class UserStep:
    """One step as written (a Dockerfile instruction, a builder call) and its parts."""

    number: str  # "1", "2", ...: how logs and errors name it
    label: str  # the instruction as written, e.g. "COPY a.txt b.txt /srv/"
    origin: Origin | None  # its Dockerfile line, when it came from one
    parts: tuple[int, ...]  # the 1-based numbers of the steps sent for it


class UserSteps:
    """The user's steps of a recipe (``steps``), and its build log shown in their terms."""

    def __init__(self, sent: Sequence[TemplateStep]) -> None:
        self._total = len(sent)
        groups: dict[int, list[int]] = {}
        for number, step in enumerate(sent, 1):
            if step.user_step is not None:
                groups.setdefault(step.user_step, []).append(number)
        self.steps = tuple(
            UserStep(str(index), sent[parts[0] - 1].describe(), sent[parts[0] - 1].origin,
                     tuple(parts))
            for index, parts in enumerate(groups.values(), 1))
        self._of = {part: user for user in self.steps for part in user.parts}
        self._names = {user.number: user for user in self.steps}
        self._cached: dict[int, bool] = {}  # step sent -> whether its first line said CACHED
        self._where: dict[int, str] = {}  # bookkeeping step sent -> the step shown for it
        last = max(self._of, default=0)
        shown = "base"
        for number in range(1, self._total + 1):
            user = self._of.get(number)
            if user is not None:
                shown = user.number
            else:
                self._where[number] = "finalize" if number > last else shown

    def get(self, name: str | None) -> UserStep | None:
        """The user's step named ``name`` (``"1"``...), if it is one."""
        return None if name is None else self._names.get(name)

    def name_of(self, sent: str | None) -> str | None:
        """How the step sent as ``sent`` (``"3"``, ``"base"``...) is shown."""
        number = _number(sent, self._total)
        if number is None:
            return sent
        user = self._of.get(number)
        return user.number if user is not None else self._where[number]

    def is_header(self, entry: BuildLogEntry) -> bool:
        """Whether ``entry`` (as shown) is the line beginning a user's step."""
        user = self.get(entry.step)
        return user is not None and entry.message.startswith(
            f"Step {user.number}/{len(self.steps)}: ")

    def show(self, entry: BuildLogEntry) -> list[BuildLogEntry]:
        """``entry`` of the server's log as the user's steps show it: none, one or two."""
        number = _number(entry.step, self._total)
        if number is None:
            return [entry]
        shown = dataclasses.replace(entry, step=self.name_of(entry.step))
        prefix = f"Step {number}/{self._total}: "
        if not entry.message.startswith(prefix) or number in self._cached:
            return [shown]
        part = entry.message[len(prefix):]
        self._cached[number] = part.endswith(_CACHED)
        user = self._of.get(number)
        if user is None:
            return []
        lines: list[BuildLogEntry] = []
        if number == user.parts[0]:
            header = f"Step {user.number}/{len(self.steps)}: {user.label}"
            if len(user.parts) == 1 and self._cached[number]:
                header += _CACHED
            lines.append(dataclasses.replace(shown, message=header))
        if len(user.parts) > 1:
            lines.append(dataclasses.replace(shown, message=part))
        return lines

    @property
    def cached(self) -> int:
        """How many user's steps came whole from the server's cache (so far)."""
        return sum(all(self._cached.get(part, False) for part in user.parts)
                   for user in self.steps)


def _number(step: str | None, total: int) -> int | None:
    """The number of a step sent (``"3"`` → 3), or None for ``base``, ``finalize``..."""
    if step is None or not step.isdigit() or not 1 <= int(step) <= total:
        return None
    return int(step)
