"""The workflow pages through Starlette's TestClient over the in-memory store: errors, escaping,
read-only mode, a store without the workflows role, a large batch drawn with its first items and
one box for the rest, the actions' checks, and the graph's SVG on its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from dogs_core import DogsClient, Jobs
from dogs_core.domain.workflow_records import StepState
from dogs_core.domain.workflows import Batch, Workflow
from dogs_core.ports import REQUIRED_ROLES
from dogs_dashboard import create_app
from dogs_dashboard.dag import dag_svg
from dogs_testing import InMemoryJobStore
from tests.dashboard.test_app import Env, make_env, send_email


@pytest.fixture
def env() -> Iterator[Env]:
    yield from make_env()


def start(env: Env, workflow: Workflow) -> str:
    started = env.http.portal.call(lambda: env.client.start_workflow(workflow))  # type: ignore[union-attr]
    return started.id


def test_list_page_and_errors(env: Env) -> None:
    wf = Workflow("<b>bold</b>")
    wf.add(send_email, {"to": "a"})
    workflow_id = start(env, wf)
    page = env.http.get("/workflows")
    assert page.status_code == 200
    assert workflow_id in page.text
    assert "&lt;b&gt;bold&lt;/b&gt;" in page.text
    assert "<b>bold</b>" not in page.text
    assert env.http.get("/workflows?state=running").text.count(workflow_id) >= 1
    assert workflow_id not in env.http.get("/workflows?state=failed").text
    assert env.http.get("/workflows?state=nope").status_code == 400
    assert env.http.get("/workflows?skip=x").status_code == 400
    missing = env.http.get("/workflows/01900000-0000-7000-8000-000000000000")
    assert missing.status_code == 404
    assert "not found" in missing.text
    malformed = env.http.get("/workflows/nope")
    assert malformed.status_code == 400
    assert "not an id" in malformed.text
    assert env.http.get(f"/workflows/{workflow_id.upper()}").status_code == 200
    fragment = env.http.get(f"/workflows/{workflow_id}?fragment=1")
    assert fragment.status_code == 200
    assert '<svg class="dag"' in fragment.text
    assert "<html" not in fragment.text


def test_a_store_without_the_workflows_role_is_a_404_naming_it() -> None:
    class OldStore(InMemoryJobStore):
        roles = REQUIRED_ROLES  # a custom store written before workflows

    with TestClient(create_app(DogsClient(OldStore(), Jobs()))) as http:
        for path, feature in (
            ("/workflows", "list_workflows"),
            ("/workflows/01900000-0000-7000-8000-000000000000", "get_workflow"),
        ):
            response = http.get(path)
            assert response.status_code == 404, path
            assert f"{feature} needs the store&#39;s &#39;workflows&#39; role" in response.text


def test_a_large_batch_draws_its_first_items_and_one_box_for_the_rest(env: Env) -> None:
    batch = Batch("thumbnails")
    for n in range(100):
        batch.add(send_email, {"to": f"u{n}"})
    batch.then(send_email, {"to": "ops"}, name="done")
    workflow_id = start(env, batch)
    page = env.http.get(f"/workflows/{workflow_id}").text
    assert page.count('class="node released"') == 30
    assert '<g class="node more" data-hidden="70">' in page
    assert 'data-step="done" data-state="blocked"' in page
    assert "… 70 more" in page


def test_actions_need_a_token_and_a_read_only_dashboard_has_none() -> None:
    for env in make_env(read_only=True):
        wf = Workflow()
        wf.add(send_email)
        workflow_id = start(env, wf)
        page = env.http.get(f"/workflows/{workflow_id}").text
        assert 'data-action="cancel_workflow"' not in page
        refused = env.post("cancel_workflow", None, workflow_id=workflow_id, confirmed="yes")
        assert refused.status_code == 403
    for env in make_env():
        wf = Workflow()
        wf.add(send_email)
        workflow_id = start(env, wf)
        token = env.token(f"/workflows/{workflow_id}")
        asked = env.post("cancel_workflow", token, workflow_id=workflow_id)
        assert "Cancel workflow" in asked.text  # the confirm page
        done = env.post(
            "cancel_workflow",
            token,
            workflow_id=workflow_id,
            confirmed="yes",
            next=f"/workflows/{workflow_id}",
        )
        assert done.status_code == 303
        assert done.headers["location"] == f"/workflows/{workflow_id}"
        # what happened rides in a signed cookie, shown once by the page it comes back to
        assert "Cancelled workflow" in env.http.get(done.headers["location"]).text
        again = env.post("cancel_workflow", token, workflow_id=workflow_id, confirmed="yes")
        assert "not cancelled" in env.http.get(again.headers["location"]).text
        unknown = env.post("retry_workflow", token, workflow_id="nope", confirmed="yes")
        assert 'class="flash error"' in env.http.get(unknown.headers["location"]).text


def test_the_svg_alone() -> None:
    from dogs_core.domain.workflow_start import compile_workflow

    wf = Workflow()
    a = wf.add(send_email, name="a")
    wf.add(send_email, name="b&c", after=[a])
    compiled = compile_workflow(
        wf, resolve=lambda job: send_email, new_id=iter(map(str, range(99))).__next__,
        partition=lambda: 0, now=__import__("datetime").datetime.now(__import__("datetime").UTC),
    )  # fmt: skip
    svg = str(dag_svg(compiled.steps, lambda record_id: f"/jobs/{record_id}"))
    assert svg.count("<path") == 1
    assert 'href="/jobs/' in svg  # the released first step links to its job
    assert 'data-step="b&amp;c"' in svg
    assert compiled.steps[1].state is StepState.BLOCKED
    with pytest.raises(ValueError, match="per_level"):
        dag_svg(compiled.steps, str, per_level=0)
