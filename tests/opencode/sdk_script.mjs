// Drives Kittiwake with OpenCode's SDK: subscribe to events, create a session, prompt it,
// list its messages; print what was seen as one JSON object. Args: URL, SDK entry file,
// and a bearer token to send (optional).
import { pathToFileURL } from "node:url"

const [url, entry, token] = process.argv.slice(2)
const { createOpencodeClient } = await import(pathToFileURL(entry).href)
const headers = token ? { Authorization: `Bearer ${token}` } : {}
const client = createOpencodeClient({ baseUrl: url, headers })

const events = []
const stream = await client.event.subscribe()
const reading = (async () => {
  for await (const event of stream.stream) {
    events.push(event)
    if (event.type === "session.status" && event.properties.status.type === "idle") break
  }
})()

const created = await client.session.create({ body: { title: "from the SDK" } })
const id = created.data.id
const reply = await client.session.prompt({
  path: { id },
  body: { parts: [{ type: "text", text: "hello from the SDK" }] },
})
const messages = await client.session.messages({ path: { id } })
await Promise.race([reading, new Promise((resolve) => setTimeout(resolve, 5000))])
process.stdout.write(
  JSON.stringify({ session: created.data, reply: reply.data, messages: messages.data, events }),
)
process.exit(0)
