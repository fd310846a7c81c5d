"""The page's timeline model (``gateway/web/static/model.js``) run in Chromium on event orders
a live stream produces: deltas before the durable events they belong to, events applied
twice (a snapshot and the history after its seq), late deltas of older messages."""

from __future__ import annotations

from pathlib import Path

from tests.web.conftest import web

SCENARIOS = """(async () => {
  const { Timeline } = await import('/web/model.js');
  const d = (extra) => ({ timestamp: 1, sessionID: 's', ...extra });
  const out = {};

  // A delta arrives before the prompt's promotion and the step's start are written.
  let t = new Timeline();
  t.delta('session.next.text.delta', d({ assistantMessageID: 'msg_2', textID: 't', delta: 'he' }));
  t.apply('session.next.prompt.promoted', d({ messageID: 'msg_1', prompt: { text: 'hi' } }));
  t.apply('session.next.step.started', d({ assistantMessageID: 'msg_2', agent: 'build' }));
  t.delta('session.next.text.delta', d({ assistantMessageID: 'msg_2', textID: 't', delta: 'llo' }));
  out.order = [...t.order];
  out.streamed = t.messages.get('msg_2').content[0].text;
  t.apply('session.next.text.ended', d({ assistantMessageID: 'msg_2', textID: 't', text: 'hello' }));
  t.delta('session.next.text.delta', d({ assistantMessageID: 'msg_2', textID: 't', delta: ' again' }));
  out.ended = t.messages.get('msg_2').content[0].text;

  // The same events applied twice change nothing.
  const events = [
    ['session.next.prompt.promoted', d({ messageID: 'msg_1', prompt: { text: 'hi' } })],
    ['session.next.step.started', d({ assistantMessageID: 'msg_2', agent: 'build' })],
    ['session.next.tool.called', d({ assistantMessageID: 'msg_2', callID: 'c', tool: 'read', input: { filePath: 'a' } })],
    ['session.next.tool.success', d({ assistantMessageID: 'msg_2', callID: 'c', content: [{ type: 'text', text: 'x' }], structured: {} })],
    ['session.next.step.ended', d({ assistantMessageID: 'msg_2', finish: 'stop', cost: 0.5, tokens: { input: 1, output: 2 } })],
  ];
  const once = new Timeline(), twice = new Timeline();
  for (const [type, data] of events) once.apply(type, structuredClone(data));
  for (const [type, data] of [...events, ...events]) twice.apply(type, structuredClone(data));
  const dump = (x) => JSON.stringify([x.order, [...x.messages.values()]]);
  out.idempotent = dump(once) === dump(twice);
  out.tool = twice.messages.get('msg_2').content[0].state.status;

  // A late delta of a message older than the newest held is not added at the end.
  t = new Timeline();
  t.prepend([{ type: 'user', id: 'msg_5', time: { created: 1 }, text: 'newest' }]);
  t.delta('session.next.text.delta', d({ assistantMessageID: 'msg_3', textID: 't', delta: 'late' }));
  t.delta('session.next.text.delta', d({ assistantMessageID: 'msg_6', textID: 't', delta: 'new' }));
  out.late = [...t.order];
  return out;
})()"""


async def test_the_model_orders_and_applies_events_as_the_stream_delivers_them(
    tmp_path: Path,
) -> None:
    async with web(tmp_path) as w:
        result = await w.page.evaluate(SCENARIOS)
    assert result == {
        "order": ["msg_1", "msg_2"],  # the prompt before the answer that streamed first
        "streamed": "hello",
        "ended": "hello",  # the durable text wins; later deltas of it are ignored
        "idempotent": True,
        "tool": "completed",
        "late": ["msg_5", "msg_6"],
    }
