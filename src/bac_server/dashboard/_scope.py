"""Team scoping, decided on the server for every page and action.

A viewer signed in with an API key sees its team's sandboxes only: another team's
sandbox is looked up exactly as the API looks it up (``Registry.owned``, ``History``),
so it is a 404 whatever the page or action, never something merely left out of the
page. The operator sees every team; each step on a sandbox is then taken as the
sandbox's own team, so the control plane's checks apply unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from bac_server.control import ControlPlane, LiveSandbox, SandboxNotFoundError, Team
from bac_server.control.sandboxes import VISIBLE_STATES
from bac_server.store import SandboxRecord

from ._sessions import Principal, Session


@dataclass(frozen=True)
class Viewer:
    principal: Principal
    session: Session
    plane: ControlPlane

    @property
    def operator(self) -> bool:
        return self.principal.operator

    @property
    def csrf(self) -> str:
        return self.session.csrf

    def sees_team(self, team_id: str) -> bool:
        team = self.principal.team
        return team is None or team.team_id == team_id

    def sandboxes(self) -> list[LiveSandbox]:
        """Every live sandbox this viewer may see."""
        team = self.principal.team
        if team is not None:
            return self.plane.registry.visible(team)
        return [s for s in self.plane.registry.all() if s.state in VISIBLE_STATES]

    def sandbox(self, sandbox_id: str) -> tuple[LiveSandbox, Team]:
        """The live sandbox and the team to act as; ``SandboxNotFoundError`` (404) for
        an unknown, ended or (for a team) another team's one."""
        team = self.principal.team
        if team is not None:
            return self.plane.registry.owned(team, sandbox_id), team
        sbx = self.plane.registry.get(sandbox_id)
        if sbx is None or sbx.state not in VISIBLE_STATES:
            raise SandboxNotFoundError(sandbox_id)
        return sbx, Team(sbx.team_id, sbx.team_id)

    async def record(self, sandbox_id: str) -> tuple[SandboxRecord, Team]:
        """The sandbox, live or ended, and its team; the same 404 rule."""
        team = self.principal.team
        if team is not None:
            return await self.plane.history.sandbox(team, sandbox_id), team
        found = await self.plane.sandbox_store.get_sandbox(sandbox_id)
        if found is None:
            raise SandboxNotFoundError(sandbox_id)
        return found, Team(found.team_id, found.team_id)

    def teams(self) -> list[Team]:
        """The teams whose usage and caps this viewer reads: its own, or (the operator)
        every team with a live sandbox."""
        team = self.principal.team
        if team is not None:
            return [team]
        ids = sorted({s.team_id for s in self.plane.registry.all()})
        return [Team(i, i) for i in ids]
