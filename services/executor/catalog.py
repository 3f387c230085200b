"""Which action versions may run: a read model of governance's state topic.

The executor fails closed: an action it has not heard of, one with no
approved version, a pinned version that is not approved, or a disabled
action is refused whatever the caller says.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventflow.governance.v1 import action_state_pb2

ACTION_NOT_APPROVED = "ACTION_NOT_APPROVED"
ACTION_DISABLED = "ACTION_DISABLED"


@dataclass(frozen=True)
class Runnable:
    action_id: str
    name: str
    version: int
    sha256: str
    permissions: tuple[str, ...]


@dataclass(frozen=True)
class Refusal:
    reason: str
    message: str


class ActionCatalog:
    def __init__(self, all_disabled: bool = False) -> None:
        self._states: dict[str, action_state_pb2.ActionState] = {}
        self._by_name: dict[tuple[str, str], str] = {}
        # The server-wide kill switch (a setting): no custom action runs.
        self.all_disabled = all_disabled

    def apply(self, action_id: str, state: action_state_pb2.ActionState | None) -> None:
        """Apply a record; older revisions than the one held are ignored."""
        held = self._states.get(action_id)
        if state is None:
            if held is not None:
                self._by_name.pop((held.organization_id, held.name), None)
                del self._states[action_id]
            return
        if held is not None and held.revision >= state.revision:
            return
        if held is not None:
            self._by_name.pop((held.organization_id, held.name), None)
        self._states[action_id] = state
        self._by_name[(state.organization_id, state.name)] = action_id

    def resolve(self, organization_id: str, ref: str, pinned: int = 0) -> Runnable | Refusal:
        if self.all_disabled:
            return Refusal(ACTION_DISABLED, "custom actions are disabled on this server")
        action_id = self._by_name.get((organization_id, ref), ref)
        state = self._states.get(action_id)
        if state is None or state.organization_id != organization_id:
            return Refusal(ACTION_NOT_APPROVED, f"action {ref!r} has no approved version")
        if not state.enabled:
            return Refusal(ACTION_DISABLED, f"action {state.name!r} is disabled")
        approved = list(state.approved_versions)
        chosen = next((v for v in approved if v.version == pinned), None) if pinned else None
        if pinned and chosen is None:
            return Refusal(
                ACTION_NOT_APPROVED, f"version {pinned} of action {state.name!r} is not approved"
            )
        if chosen is None:
            if not approved:
                return Refusal(
                    ACTION_NOT_APPROVED, f"action {state.name!r} has no approved version"
                )
            chosen = approved[0]
        return Runnable(
            state.action_id, state.name, chosen.version, chosen.sha256, tuple(chosen.permissions)
        )
