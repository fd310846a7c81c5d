"""Slack's limits: a 429 with ``Retry-After`` on ``chat.update`` delays an answer's edits
without reordering or losing any, and a dropped Socket Mode connection is reopened (a
direct message over the new one starts a session)."""

from __future__ import annotations

from tests.opencode.harness import Provider
from tests.slack.harness import Setup, bot, mock_slack
from tests.slack.test_slack_threads import final


async def test_a_rate_limited_edit_is_sent_late_in_order_and_the_link_reconnects(
    tmp_path, provider: Provider
) -> None:
    async with mock_slack() as slack:
        setup = Setup(tmp_path, provider, slack)
        async with bot(setup, slack):
            slack.limits["chat.update"] = [1.5]
            await slack.say("stream please")
            await slack.until(lambda: bool(slack.posted()))
            [(reply, _)] = slack.posted()
            await slack.until(lambda: final(slack, reply) is not None)
            [limited] = [c for c in slack.calls if c.limited]
            assert limited.method == "chat.update" and limited.params["ts"] == reply
            sent = [c for c in slack.calls if c.method == "chat.update" and not c.limited]
            # Nothing went out before the Retry-After was over, and then in order: each
            # edit shows at least what the refused one and the edits before it showed.
            assert sent[0].at - limited.at >= 1.5
            texts = [limited.params["text"]] + [c.params["text"] for c in sent]
            answers = [t.split("\n")[0].strip() for t in texts]
            assert all(b.startswith(a) for a, b in zip(answers, answers[1:], strict=False))
            assert answers[-1] == "One two three." and "_tokens:" in texts[-1]

            slack.drop()
            await slack.until(lambda: slack.connections == 2)
            direct = await slack.say("hello again", channel="D1", mention=False, im=True)
            await slack.until(lambda: len(slack.posted()) == 2)
            [(second, posted)] = slack.posted()[1:]
            assert posted["channel"] == "D1" and posted["thread_ts"] == direct
            await slack.until(lambda: final(slack, second) is not None)
            assert len(slack.of("apps.connections.open")) == 2
