"""The app's routes compile URL builders only when asked to build, and still build right."""

from __future__ import annotations

from gateway import create_app
from runtime import open_runtime


async def test_routes_build_urls_on_first_use(tmp_path):
    async with open_runtime(data_dir=tmp_path) as rt:
        app = create_app(rt)
        rules = list(app.url_map.iter_rules())
        assert len(rules) > 40
        # Registration compiled no builder: each rule holds the stand-in for both kinds.
        assert {r._build.__name__ for r in rules} == {"build_on_first_use"}
        assert {r._build_unknown.__name__ for r in rules} == {"build_on_first_use"}

        session = next(r for r in rules if r.rule == "/api/session/<session_id>")
        adapter = app.url_map.bind("localhost")
        for _ in range(2):  # compiled by the first build, reused by the second
            url = adapter.build(session.endpoint, {"session_id": "ses_1 x"}, method="GET")
            assert url == "/api/session/ses_1%20x"
            extra = adapter.build(
                session.endpoint, {"session_id": "ses_2", "after": 5}, method="GET"
            )
            assert extra == "/api/session/ses_2?after=5"
        assert session._build_unknown.__name__ != "build_on_first_use"
        assert session._build.__name__ == "build_on_first_use"  # each kind compiles on its own
        strict = adapter.build(
            session.endpoint, {"session_id": "ses_3", "after": 5}, append_unknown=False
        )
        assert strict == "/api/session/ses_3"
        assert session._build.__name__ != "build_on_first_use"
        # Matching never needed a builder.
        matched = adapter.match("/api/session/ses_9", method="GET")
        assert matched == (session.endpoint, {"session_id": "ses_9"})
