"""The app's routes build URLs (Werkzeug's own rules) and match without building."""

from __future__ import annotations

from gateway import create_app
from runtime import open_runtime


async def test_routes_build_and_match_urls(tmp_path):
    async with open_runtime(data_dir=tmp_path) as rt:
        app = create_app(rt)
        rules = list(app.url_map.iter_rules())
        assert len(rules) > 40
        session = next(r for r in rules if r.rule == "/api/session/<session_id>")
        adapter = app.url_map.bind("localhost")
        url = adapter.build(session.endpoint, {"session_id": "ses_1 x"}, method="GET")
        assert url == "/api/session/ses_1%20x"
        extra = adapter.build(session.endpoint, {"session_id": "ses_2", "after": 5}, method="GET")
        assert extra == "/api/session/ses_2?after=5"
        strict = adapter.build(
            session.endpoint, {"session_id": "ses_3", "after": 5}, append_unknown=False
        )
        assert strict == "/api/session/ses_3"
        matched = adapter.match("/api/session/ses_9", method="GET")
        assert matched == (session.endpoint, {"session_id": "ses_9"})
