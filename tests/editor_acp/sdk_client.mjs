// Drives `kittiwake acp` with ACP's TypeScript SDK (@agentclientprotocol/sdk): initialize, a
// new session, a prompt whose edit asks for permission (allowed once), a prompt cancelled
// mid-answer, the session list, and the session loaded again. Prints what it saw as one
// JSON object. Args: the SDK's entry file, the project directory, then the agent's command.
import { spawn } from "node:child_process"
import { Readable, Writable } from "node:stream"
import { pathToFileURL } from "node:url"

const [entry, cwd, ...command] = process.argv.slice(2)
const { client, ndJsonStream } = await import(pathToFileURL(entry).href)

const child = spawn(command[0], command.slice(1), { cwd, stdio: ["pipe", "pipe", "inherit"] })
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout))

const updates = []
const permissions = []
let changed = () => {}
const until = async (predicate) => {
  while (!predicate()) await new Promise((resolve) => (changed = resolve))
}

const app = client({ name: "kittiwake-tests" })
  .onNotification("session/update", ({ params }) => {
    updates.push(params.update)
    changed()
  })
  .onRequest("session/request_permission", ({ params }) => {
    permissions.push(params)
    changed()
    return { outcome: { outcome: "selected", optionId: "once" } }
  })

const seen = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} })
  const created = await ctx.request("session/new", { cwd, mcpServers: [] })
  const sessionId = created.sessionId
  const text = (words) => [{ type: "text", text: words }]
  const edited = await ctx.request("session/prompt", { sessionId, prompt: text("edit the notes") })
  const chunks = () => updates.filter((u) => u.sessionUpdate === "agent_message_chunk").length
  const before = chunks()
  const long = ctx.request("session/prompt", { sessionId, prompt: text("count to a million") })
  await until(() => chunks() > before)
  await ctx.notify("session/cancel", { sessionId })
  const cancelled = await long
  const listed = await ctx.request("session/list", {})
  const replayedFrom = updates.length
  await ctx.request("session/load", { sessionId, cwd, mcpServers: [] })
  return {
    init, created, edited, cancelled, listed, permissions,
    live: updates.slice(0, replayedFrom), replayed: updates.slice(replayedFrom),
  }
})
child.stdin.end()
await new Promise((resolve) => child.on("exit", resolve))
process.stdout.write(JSON.stringify({ ...seen, exitCode: child.exitCode }))
process.exit(0)
