"""The dashboard's sign-in as someone who is not signed in sees it, through Starlette's
TestClient over the in-memory store: the sign-in, 401, 429 and error pages name nothing of the
data source; failed sign-ins are throttled per client address (429 with ``Retry-After``, a
fake clock, no sleep) and logged at WARNING under ``dogs`` without what was tried; and the
throttle's own arithmetic and bounded memory."""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from starlette.testclient import TestClient

from dogs_core import DogsClient, Jobs
from dogs_core.errors import InvalidOptionError
from dogs_dashboard import create_app
from dogs_dashboard.auth import CredentialsAuth, SignInThrottle, parse_credentials
from dogs_testing import InMemoryJobStore

SOURCE = "mongodb://ops:hunter2-secret@127.0.0.1:27321/shopdb?replicaSet=rs0&authSource=admin"
#: What of the source must never reach someone not signed in.
LEAKS = ("mongodb", "27321", "127.0.0.1", "shopdb", "rs0", "ops:")
TOKEN = "op-token-0123456789"
PASSWORD = "al1ce-pass-word"
CSRF = re.compile(r'name="csrf_token" value="([0-9a-f]{64})"')


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def served(
    *, tokens: bool = True, users: bool = False, **limits: float
) -> Iterator[tuple[TestClient, TestClient, FakeClock]]:
    """The dashboard behind tokens and/or basic users, a throttle on a fake clock, and two
    browsers from different addresses."""
    clock = FakeClock()
    auth = CredentialsAuth(
        tokens=parse_credentials(f"ops:{TOKEN}", field="t", tokens=True) if tokens else (),
        users=parse_credentials(f"alice:{PASSWORD}", field="u", tokens=False) if users else (),
        secret="s" * 32,
        throttle=SignInThrottle(clock=clock, **limits),  # type: ignore[arg-type]
    )
    app = create_app(DogsClient(InMemoryJobStore(), Jobs()), auth=auth, source=SOURCE)
    with (
        TestClient(app, client=("203.0.113.7", 4000), follow_redirects=False) as attacker,
        TestClient(app, client=("198.51.100.2", 4000), follow_redirects=False) as other,
    ):
        yield attacker, other, clock


def assert_no_source(text: str) -> None:
    for leak in LEAKS:
        assert leak not in text, f"{leak!r} shown to someone not signed in"


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def basic(user: str, password: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def login_form(http: TestClient, token: str) -> dict[str, str]:
    match = CSRF.search(http.get("/login").text)
    assert match is not None
    return {"csrf_token": match.group(1), "token": token, "next": "/"}


# -- what someone not signed in sees -------------------------------------------------------------


def test_the_sign_in_and_error_pages_name_nothing_of_the_data_source() -> None:
    with served(users=True) as (http, _, _clock):
        login = http.get("/login")
        assert login.status_code == 200
        assert 'id="login-form"' in login.text
        assert_no_source(login.text)
        asked = http.get("/jobs")  # basic users: 401 asking the browser
        assert asked.status_code == 401
        assert_no_source(asked.text)
        wrong = http.post("/login", data=login_form(http, "wrong-token-000"))
        assert wrong.status_code == 401
        assert 'id="login-failed"' in wrong.text
        assert_no_source(wrong.text)
        forged = http.post("/login", data={"csrf_token": "0" * 64, "token": TOKEN})
        assert forged.status_code == 403
        assert_no_source(forged.text)
        refused = http.get("/", headers=basic("alice", "not-her-password"))
        assert refused.status_code == 401
        assert_no_source(refused.text)
        assert 'id="user"' not in refused.text, "nobody is named before signing in"
        # Signed in, the header names the source (its password masked).
        page = http.get("/", headers=basic("alice", PASSWORD)).text
        assert "mongodb://ops:***@127.0.0.1:27321/shopdb" in page
        assert "hunter2" not in page


def test_without_authentication_the_source_is_shown() -> None:
    app = create_app(DogsClient(InMemoryJobStore(), Jobs()), source=SOURCE)
    with TestClient(app) as http:
        assert 'id="source"' in http.get("/").text


# -- throttling ------------------------------------------------------------------------------------


def test_bad_tokens_are_throttled_per_client_and_logged_without_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="dogs")
    with served(free_failures=3, delay=2, max_delay=60) as (attacker, other, clock):
        tried = [f"guess-{n:04d}-abcdef" for n in range(5)]
        answers = [attacker.get("/", headers=bearer(token)).status_code for token in tried]
        # 3 free failures (each sent to the login page), the 4th imposes a 2 s wait, so the
        # 5th is refused unchecked.
        assert answers == [303, 303, 303, 303, 429]
        throttled = attacker.get("/", headers=bearer(TOKEN))
        assert throttled.status_code == 429, "while it waits, even the good token is refused"
        assert throttled.headers["retry-after"] == "2"
        assert_no_source(throttled.text)
        # Another address is not affected.
        assert other.get("/", headers=bearer(TOKEN)).status_code == 200
        clock.now += 2
        assert attacker.get("/", headers=bearer(tried[0])).status_code == 303
        assert attacker.get("/", headers=bearer(TOKEN)).headers["retry-after"] == "4"  # doubled
        clock.now += 4
        assert attacker.get("/", headers=bearer(TOKEN)).status_code == 200
        assert attacker.get("/", headers=bearer(tried[1])).status_code == 303, "forgotten"
    failures = [r for r in caplog.records if "failed sign-in" in r.getMessage()]
    assert len(failures) == 6
    assert {(r.name, r.levelno) for r in failures} == {("dogs.dashboard.auth", logging.WARNING)}
    assert all("203.0.113.7" in r.getMessage() for r in failures)
    assert "waits 2 s" in failures[3].getMessage()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for secret in [*tried, TOKEN]:
        assert secret not in logged


def test_the_login_form_and_basic_credentials_are_throttled_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="dogs")
    with served(users=True, free_failures=2, delay=30, max_delay=30) as (attacker, other, _):
        form = login_form(attacker, "wrong-token-000")
        assert [attacker.post("/login", data=form).status_code for _ in range(3)] == [
            401,
            401,
            401,
        ]
        page = attacker.post("/login", data=login_form(attacker, TOKEN))
        assert page.status_code == 429
        assert page.headers["retry-after"] == "30"
        assert 'id="login-throttled"' in page.text
        assert_no_source(page.text)
        assert "dogs_session" not in page.headers.get("set-cookie", "")
        assert attacker.get("/", headers=basic("alice", PASSWORD)).status_code == 429
        assert other.get("/", headers=basic("alice", "bad-password")).status_code == 401
        assert other.get("/", headers=basic("alice", PASSWORD)).status_code == 200
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "wrong-token-000" not in logged
    assert "bad-password" not in logged
    assert PASSWORD not in logged


def test_a_signed_in_browser_behind_the_same_address_stays_signed_in() -> None:
    with served(free_failures=1, delay=60, max_delay=60) as (attacker, _, _clock):
        app = attacker.app
        with TestClient(app, client=("203.0.113.7", 5000), follow_redirects=False) as colleague:
            assert colleague.post("/login", data=login_form(colleague, TOKEN)).status_code == 303
            for _ in range(3):
                attacker.get("/", headers=bearer("guess-guess-guess"))
            assert attacker.get("/", headers=bearer(TOKEN)).status_code == 429
            page = colleague.get("/")
            assert page.status_code == 200, "a session cookie is not a sign-in attempt"
            assert 'id="user">ops' in page.text


# -- the throttle itself ---------------------------------------------------------------------------


def test_the_wait_doubles_up_to_its_cap_and_is_forgotten_after_a_quiet_spell() -> None:
    clock = FakeClock()
    throttle = SignInThrottle(free_failures=1, delay=1, max_delay=8, forget_after=100, clock=clock)
    waits = [throttle.failed("a") for _ in range(7)]
    assert waits == [0, 1, 2, 4, 8, 8, 8]
    assert throttle.wait("a") == 8
    clock.now += 5
    assert throttle.wait("a") == 3
    clock.now += 95  # 100 s after its last failure
    assert throttle.wait("a") == 0
    assert len(throttle) == 0
    assert throttle.failed("a") == 0, "a fresh start"
    throttle.failed("a")
    throttle.succeeded("a")
    assert throttle.wait("a") == 0
    assert throttle.failed("a") == 0


def test_the_throttle_remembers_a_bounded_number_of_clients() -> None:
    throttle = SignInThrottle(free_failures=0, max_clients=100, clock=FakeClock())
    for n in range(10_000):
        throttle.failed(f"10.0.{n // 256}.{n % 256}")
    assert len(throttle) == 100
    assert throttle.wait("10.0.39.15") > 0, "the newest are kept"
    assert throttle.wait("10.0.0.0") == 0, "the oldest were forgotten"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"free_failures": -1}, "free_failures"),
        ({"delay": 0}, "delay"),
        ({"delay": 10, "max_delay": 5}, "max_delay"),
        ({"max_clients": 0}, "max_clients"),
        ({"forget_after": "soon"}, "forget_after"),
    ],
)
def test_the_throttle_checks_its_options(options: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidOptionError, match=field):
        SignInThrottle(**options)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="throttle"):
        CredentialsAuth(tokens=parse_credentials(TOKEN, field="t", tokens=True), throttle=3)  # type: ignore[arg-type]
