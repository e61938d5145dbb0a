"""The worked examples of docs/schedules.md, docs/webhooks.md and docs/quotas.md, run as
written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from standardwebhooks import WebhookVerificationError

from server_fixtures import write_project
from standardagents import Runtime
from standardagents.service.quotas import QuotaPolicy, policy_from_env
from standardagents.service.ratelimit import RateLimit, limits_from_env
from standardagents.service.scheduler import sync_defined
from standardagents.service.webhooks import sign
from standardagents.store import SQLStore, serviceops

DOCS = Path(__file__).resolve().parents[1] / "docs"


def block(page: str, language: str, first_line: str = "") -> str:
    text = (DOCS / page).read_text(encoding="utf-8")
    found = re.search(rf"```{language}\n({re.escape(first_line)}.*?)```", text, re.S)
    assert found, f"docs/{page} shows a {language} block starting {first_line!r}"
    return found.group(1)


async def test_schedules_page_example_is_stored_with_its_timing(tmp_path: Path) -> None:
    source = block("schedules.md", "python", "# agents/schedules/morning_report.py")
    project = write_project(tmp_path / "project", {"agents/schedules/morning_report.py": source})
    store = SQLStore(f"sqlite:///{tmp_path / 'docs.db'}")
    rt = await Runtime.open(project, store=store)
    try:
        await sync_defined(rt)
        [record] = await serviceops.run_op(store, serviceops.list_schedules, None, write=False)
        definition = rt.registry.get("schedules", "morning_report")
    finally:
        await rt.aclose()
    assert (record.name, record.agent, record.cron, record.timezone, record.overlap, record.missed) == (
        "morning_report", "helper", "0 8 * * 1-5", "Europe/Paris", "skip", "once")
    assert definition.same_thread is True


async def test_webhooks_page_subscription_loads_from_the_project(tmp_path: Path) -> None:
    source = block("webhooks.md", "python", "# agents/webhooks/ops_channel.py")
    project = write_project(tmp_path / "project", {"agents/webhooks/ops_channel.py": source})
    rt = await Runtime.open(project, database_url=f"sqlite:///{tmp_path / 'hooks.db'}")
    try:
        definition = rt.registry.get("webhooks", "ops_channel")
    finally:
        await rt.aclose()
    assert (definition.url, definition.events) == ("https://ops.example.com/agents",
                                                   ["execution.failed", "approval.requested"])


def test_webhooks_page_receiver_takes_a_signed_delivery_once_and_refuses_a_forged_one() -> None:
    namespace: dict[str, object] = {}
    exec(block("webhooks.md", "python", "from standardwebhooks import Webhook"), namespace)
    receive = namespace["receive"]
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = json.dumps({"type": "execution.done", "timestamp": "2026-01-01T00:00:00Z",
                       "data": {"executionId": "exe_1"}})
    import time

    headers = sign(secret, "msg_1", int(time.time()), body)
    first = receive(body.encode(), headers, secret)  # type: ignore[operator]
    again = receive(body.encode(), headers, secret)  # type: ignore[operator]
    assert first == json.loads(body)
    assert again is None
    with pytest.raises(WebhookVerificationError):
        receive(body.replace("exe_1", "exe_2").encode(), headers, secret)  # type: ignore[operator]


def test_quotas_page_policy_and_limits_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (DOCS / "quotas.md").read_text(encoding="utf-8")
    quotas, limits = re.findall(r"```json\n(.*?)```", text, re.S)
    monkeypatch.setenv("STANDARDAGENTS_QUOTAS", quotas)
    monkeypatch.setenv("STANDARDAGENTS_RATE_LIMITS", limits)
    assert policy_from_env() == QuotaPolicy(concurrent_turns=2, turns_per_minute=20, tokens_per_day=200000,
                                            cost_per_day=5.0, by="user", on_limit="reject")
    assert limits_from_env() == {"default": RateLimit(requests=500, tokens=200000),
                                 "cheap": RateLimit(requests=2, per=1)}


def test_quotas_page_python_policy_builds() -> None:
    namespace: dict[str, object] = {}
    exec(block("quotas.md", "python", "from standardagents.service.quotas"), namespace)
    assert namespace["policy"] == QuotaPolicy(concurrent_turns=2, turns_per_minute=20, on_limit="wait", max_wait=10)


def test_bad_quota_setting_names_the_variable_and_field(monkeypatch: pytest.MonkeyPatch) -> None:
    from standardagents.exceptions import DefinitionError

    monkeypatch.setenv("STANDARDAGENTS_QUOTAS", json.dumps({"turnsPerMinut": 3}))
    with pytest.raises(DefinitionError) as caught:
        policy_from_env()
    assert str(caught.value) == "STANDARDAGENTS_QUOTAS: turnsPerMinut: Extra inputs are not permitted"
