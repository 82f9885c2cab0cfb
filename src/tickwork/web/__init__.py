"""The HTTP side of tickwork: a thin adapter over :class:`tickwork.client.Client`.

- :mod:`tickwork.web.app`: ``create_app(client, open_access=...)``, the one FastAPI app.
- :mod:`tickwork.web.api`: the JSON API under ``/api/v1``, a module per resource.
- :mod:`tickwork.web.auth`: API keys and tenants (who is calling).
- :mod:`tickwork.web.errors`: the error envelope and the body-size limit.
- :mod:`tickwork.web.metrics`: Prometheus metrics, read from the store at scrape time.
- :mod:`tickwork.web.dashboard`: the server-rendered dashboard.

No SQL and no store here: every read and command goes through the client.
"""
