"""The Dogs web dashboard (extra ``dogs-py[dashboard]``): an ASGI app over a DogsClient.

::

    from dogs_dashboard import create_app
    app = create_app(client, read_only=False, secret=os.environ["DOGS_DASHBOARD_SECRET"])

Serve it with ``dogs dashboard --uri ...`` or mount it in a FastAPI, Starlette or Django
application under a path, behind that application's authentication (docs/dashboard.md).
"""

from __future__ import annotations

from dogs_dashboard.app import create_app

__all__ = ["create_app"]
