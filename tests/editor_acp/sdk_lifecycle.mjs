// Drives `kittiwake acp` with ACP's TypeScript SDK (@agentclientprotocol/sdk) through the
// end of sessions and of the sign-in: two sessions made, one deleted (`session/delete`),
// the list after it, the deleted one deleted again, `logout`, then a new session asked for.
// Prints what it saw as one JSON object (an error answered as {error: {code, message}}).
// Args: the SDK's entry file, the project directory, then the agent's command.
import { spawn } from "node:child_process"
import { Readable, Writable } from "node:stream"
import { pathToFileURL } from "node:url"

const [entry, cwd, ...command] = process.argv.slice(2)
const { client, ndJsonStream } = await import(pathToFileURL(entry).href)

const child = spawn(command[0], command.slice(1), { cwd, stdio: ["pipe", "pipe", "inherit"] })
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout))
const app = client({ name: "kittiwake-tests" }).onNotification("session/update", () => {})

const seen = await app.connectWith(stream, async (ctx) => {
  const answer = (request) =>
    request.then(
      (result) => ({ result: result ?? null }),
      (error) => ({ error: { code: error.code, message: error.message } }),
    )
  const init = await ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} })
  const kept = await ctx.request("session/new", { cwd, mcpServers: [] })
  const gone = await ctx.request("session/new", { cwd, mcpServers: [] })
  const deleted = await answer(ctx.request("session/delete", { sessionId: gone.sessionId }))
  const listed = await ctx.request("session/list", {})
  const again = await answer(ctx.request("session/delete", { sessionId: gone.sessionId }))
  const logout = await answer(ctx.request("logout", {}))
  const after = await answer(ctx.request("session/new", { cwd, mcpServers: [] }))
  return { init, kept, gone, deleted, listed, again, logout, after }
})
child.stdin.end()
await new Promise((resolve) => child.on("exit", resolve))
process.stdout.write(JSON.stringify({ ...seen, exitCode: child.exitCode }))
process.exit(0)
