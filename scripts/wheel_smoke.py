"""What scripts/check_wheel runs with the interpreter of a fresh virtual environment holding the
built wheel (and one extra), from a directory outside the repository.

    python wheel_smoke.py EXTRA      # EXTRA: base, django, fastapi, flask, dashboard, otel, ...

It checks that the packages come from that environment (not from a checkout), that the base
install stays lean (no web framework), and what the extra brings: the integration imports, and
for ``dashboard`` the app's templates and static files answer from the installed package. Prints
one line per check; exits non-zero at the first failure.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path
from typing import Any

FRAMEWORKS = ("django", "fastapi", "flask", "starlette", "jinja2", "uvicorn")
INTEGRATIONS = {
    "django": "dogs_integrations.django",
    "fastapi": "dogs_integrations.fastapi",
    "flask": "dogs_integrations.flask",
    "otel": "dogs_integrations.otel",
    "prometheus": "dogs_integrations.prometheus",
    "dashboard": "dogs_dashboard",
}


def check(what: str, ok: bool) -> None:
    print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        sys.exit(1)


async def get(app: Any, path: str) -> tuple[int, bytes]:
    """One GET through the ASGI app, without an HTTP client."""
    scope = {"type": "http", "http_version": "1.1", "method": "GET", "path": path}
    scope |= {"raw_path": path.encode(), "query_string": b"", "headers": [], "root_path": ""}
    scope |= {"scheme": "http", "server": ("test", 80), "client": ("test", 1)}
    sent: list[dict[str, Any]] = []
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)  # the client stays until the response is sent
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await asyncio.wait_for(app(scope, receive, send), timeout=30)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body


def dashboard() -> None:
    from dogs_core import DogsClient
    from dogs_dashboard import create_app
    from dogs_testing import InMemoryJobStore

    package = Path(importlib.import_module("dogs_dashboard").__file__ or "").parent
    templates = sorted(p.name for p in (package / "templates").glob("*.html"))
    check(f"templates installed: {', '.join(templates)}", len(templates) > 0)
    app = create_app(DogsClient(InMemoryJobStore()))
    status, body = asyncio.run(get(app, "/"))
    check(f"GET / from the installed templates: {status}", status == 200 and b"<html" in body)
    status, body = asyncio.run(get(app, "/static/dashboard.js"))
    check(f"GET /static/dashboard.js: {status}, {len(body)} bytes", status == 200 and body)


def main() -> None:
    extra = sys.argv[1]
    here = Path(sys.prefix)
    for package in ("dogs_core", "dogs_mongo", "dogs_testing", "dogs_integrations"):
        spec = importlib.util.find_spec(package)
        origin = Path(spec.origin or "") if spec is not None else Path()
        check(f"{package} from {origin.parent}", here in origin.parents)
    version = importlib.metadata.version("dogs-py")
    check(f"dogs-py {version} installed", bool(version))
    if extra == "base":
        installed = {d.metadata["Name"].lower() for d in importlib.metadata.distributions()}
        check(
            f"lean: none of {', '.join(FRAMEWORKS)} installed",
            not installed.intersection(FRAMEWORKS),
        )
        importlib.import_module("dogs_integrations.frameworks")
        check("dogs_integrations.frameworks imports without a framework", True)
        return
    module = INTEGRATIONS.get(extra)
    if module is not None:
        importlib.import_module(module)
        check(f"import {module}", True)
    if extra == "dashboard":
        dashboard()


if __name__ == "__main__":
    main()
