"""The executor's read model of runnable actions: it fails closed."""

from __future__ import annotations

from eventflow.governance.v1 import action_state_pb2 as st

from services.executor.catalog import ActionCatalog, Refusal, Runnable


def state(
    revision: int,
    *,
    enabled: bool = True,
    versions: tuple[int, ...] = (2, 1),
    org: str = "acme",
    name: str = "score",
) -> st.ActionState:
    return st.ActionState(
        action_id="a-1",
        organization_id=org,
        name=name,
        enabled=enabled,
        approved_versions=[
            st.RunnableVersion(version=v, sha256=f"sha{v}", permissions=["read_secret:K"])
            for v in versions
        ],
        revision=revision,
    )


def test_the_newest_approved_version_runs_by_name_or_id() -> None:
    catalog = ActionCatalog()
    catalog.apply("a-1", state(1))
    by_name = catalog.resolve("acme", "score")
    assert isinstance(by_name, Runnable) and (by_name.version, by_name.sha256) == (2, "sha2")
    assert catalog.resolve("acme", "a-1") == by_name
    assert by_name.permissions == ("read_secret:K",)


def test_a_pinned_version_must_be_approved() -> None:
    catalog = ActionCatalog()
    catalog.apply("a-1", state(1))
    pinned = catalog.resolve("acme", "score", pinned=1)
    assert isinstance(pinned, Runnable) and pinned.version == 1
    refused = catalog.resolve("acme", "score", pinned=3)
    assert isinstance(refused, Refusal) and refused.reason == "ACTION_NOT_APPROVED"


def test_unknown_unapproved_and_foreign_actions_are_refused() -> None:
    catalog = ActionCatalog()
    assert catalog.resolve("acme", "score") == Refusal(
        "ACTION_NOT_APPROVED", "action 'score' has no approved version"
    )
    catalog.apply("a-1", state(1, versions=()))
    assert isinstance(catalog.resolve("acme", "score"), Refusal)
    catalog.apply("a-1", state(2))
    for org, ref in (("globex", "score"), ("globex", "a-1")):
        refused = catalog.resolve(org, ref)
        assert isinstance(refused, Refusal) and refused.reason == "ACTION_NOT_APPROVED"


def test_a_disabled_action_and_the_server_wide_switch_refuse_everything() -> None:
    catalog = ActionCatalog()
    catalog.apply("a-1", state(1, enabled=False))
    refused = catalog.resolve("acme", "score")
    assert isinstance(refused, Refusal) and refused.reason == "ACTION_DISABLED"
    everything_off = ActionCatalog(all_disabled=True)
    everything_off.apply("a-1", state(1))
    refused = everything_off.resolve("acme", "score")
    assert isinstance(refused, Refusal) and refused.reason == "ACTION_DISABLED"


def test_older_or_repeated_records_do_not_undo_newer_state() -> None:
    catalog = ActionCatalog()
    catalog.apply("a-1", state(5, enabled=False))
    catalog.apply("a-1", state(4, enabled=True))  # redelivered, older
    catalog.apply("a-1", state(5, enabled=True))  # same revision again
    refused = catalog.resolve("acme", "score")
    assert isinstance(refused, Refusal) and refused.reason == "ACTION_DISABLED"


def test_a_tombstone_removes_the_action_and_a_rename_moves_its_name() -> None:
    catalog = ActionCatalog()
    catalog.apply("a-1", state(1))
    catalog.apply("a-1", state(2, name="score-v2"))
    assert isinstance(catalog.resolve("acme", "score"), Refusal)
    assert isinstance(catalog.resolve("acme", "score-v2"), Runnable)
    catalog.apply("a-1", None)
    assert isinstance(catalog.resolve("acme", "score-v2"), Refusal)
    assert isinstance(catalog.resolve("acme", "a-1"), Refusal)
