// The prompt box's agent and model pickers: the agents and models of the open session's
// Location (`GET /api/agent`, `GET /api/model`), the session's own selected; a choice
// switches the session (`POST /api/session/{id}/agent` or `/model`), which takes effect at
// its next turn and shows in the timeline as an "Agent:" or "Model:" note.

import { api, enc } from "./api.js";
import { $, h, fill } from "./dom.js";

const CATALOG_TTL = 30_000; // ms a Location's agents and models are reused before read again

export class Pickers {
  constructor(app) {
    this.app = app;
    this.catalogs = new Map(); // directory -> { at, agents, models }
    $("agent").addEventListener("change", () => this.choose("agent"));
    $("model").addEventListener("change", () => this.choose("model"));
  }

  async catalog(directory) {
    const known = this.catalogs.get(directory);
    if (known && performance.now() - known.at < CATALOG_TTL) return known;
    const where = directory ? `?${enc("location[directory]")}=${enc(directory)}` : "";
    const [agents, models] = await Promise.all([api(`api/agent${where}`), api(`api/model${where}`)]);
    const fresh = {
      at: performance.now(),
      agents: agents.data.filter((a) => a.mode !== "subagent" && !a.hidden).map((a) => a.id).sort(),
      models: models.data.filter((m) => m.enabled),
    };
    this.catalogs.set(directory, fresh);
    return fresh;
  }

  /** Fill the pickers for *view*'s session (its agent and model selected). */
  async show(view) {
    const info = view.info;
    let catalog;
    try {
      catalog = await this.catalog(info.location?.directory ?? "");
    } catch (e) {
      this.app.showError(e);
      return;
    }
    if (this.app.view !== view) return;
    const agent = info.agent ?? "";
    const agents = catalog.agents.includes(agent) || !agent ? catalog.agents : [agent, ...catalog.agents];
    fill($("agent"), !agent && h("option", { value: "", text: "agent: default" }),
      agents.map((a) => h("option", { value: a, text: `agent: ${a}`, selected: a === agent })));
    const current = info.model ? `${info.model.providerID}/${info.model.id}` : "";
    const byProvider = new Map();
    for (const m of catalog.models) {
      if (!byProvider.has(m.providerID)) byProvider.set(m.providerID, []);
      byProvider.get(m.providerID).push(m);
    }
    const listed = catalog.models.some((m) => `${m.providerID}/${m.id}` === current);
    fill($("model"),
      !current && h("option", { value: "", text: "model: default" }),
      current && !listed && h("option", { value: current, text: current, selected: true }),
      [...byProvider.keys()].sort().map((provider) =>
        h("optgroup", { label: provider },
          byProvider.get(provider).sort((a, b) => a.id.localeCompare(b.id)).map((m) => {
            const value = `${m.providerID}/${m.id}`;
            return h("option", { value, text: m.name && m.name !== m.id ? `${m.id} (${m.name})` : m.id, selected: value === current });
          }))));
    $("agent").disabled = false;
    $("model").disabled = false;
  }

  async choose(kind) {
    const view = this.app.view;
    if (!view) return;
    const value = $(kind).value;
    if (!value) return;
    let body;
    if (kind === "agent") body = { agent: value };
    else {
      const slash = value.indexOf("/");
      body = { model: { providerID: value.slice(0, slash), id: value.slice(slash + 1) } };
    }
    await view.act(async () => {
      try {
        await api(view.path(`/${kind}`), { method: "POST", body });
        view.info = (await api(view.path())).data;
      } finally {
        if (this.app.view === view) await this.show(view);
      }
    });
  }
}
