/* stead dashboard: plain JavaScript, no build step, nothing loaded from elsewhere.
 *
 * Auth: the bearer token comes in the URL fragment once (#token=...; a fragment never reaches
 * a server or its logs), is kept in sessionStorage and sent as an Authorization header. No
 * cookies, so another site cannot make this browser act on stead (no CSRF surface).
 * Every value from a run is put on the page as text (textContent), never as markup.
 */
"use strict";

const $main = document.getElementById("main");
const TOKEN_KEY = "stead.token";
let timer = null;       // the current page's refresh timer
let stream = null;      // the current page's live stream (an AbortController)
/* The current page's signal, aborted when another page is routed to: a page checks it after
   each wait, so that a slow answer for a page left behind never draws over the page shown
   now, starts its timer or keeps polling. */
let pageCtl = new AbortController();
let schemaCache = null;

// -- small helpers ------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${token()}`, ...(options.headers || {}) };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {
    ...options,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  if (r.status === 401) { showLogin("That token was refused."); throw new Error("unauthorized"); }
  const body = r.headers.get("content-type")?.includes("json") ? await r.json() : null;
  if (!r.ok) {
    const detail = body && (typeof body.detail === "string" ? body.detail
      : JSON.stringify(body.detail));
    throw new Error(detail || `HTTP ${r.status}`);
  }
  return body;
}

function toast(text) {
  const t = h("div", { class: "toast", role: "status" }, text);
  document.body.append(t);
  setTimeout(() => t.remove(), 4000);
}

function badge(status) { return h("span", { class: `badge s-${status}` }, status.replace("_", " ")); }
function effect(cls) { return cls ? h("span", { class: `badge e-${cls}` }, cls.replace("_", " ")) : null; }
function shortId(id) { return id.length > 14 ? id.slice(0, 12) + "…" : id; }
function tokens(u) { return u.input_tokens + u.output_tokens; }
function money(x) { return x === null || x === undefined ? "—" : `$${x.toFixed(x < 0.01 ? 4 : 2)}`; }
function pretty(text) {
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}
function num(n) { return Number(n || 0).toLocaleString("en-US"); }
function secs(s) {
  if (s === null || s === undefined) return "…";
  return s < 1 ? `${Math.round(s * 1000).toLocaleString("en-US")} ms` : s < 60 ? `${s.toFixed(1)} s` : ago(s);
}
/* An answer schema in words: what a person may answer. */
function answerType(schema) {
  if (!schema || typeof schema !== "object") return "any text";
  if (Array.isArray(schema.enum)) return "one of: " + schema.enum.map((v) => JSON.stringify(v)).join(", ");
  if (schema.const !== undefined) return `exactly ${JSON.stringify(schema.const)}`;
  if (Array.isArray(schema.anyOf)) return schema.anyOf.map(answerType).join(", or ");
  switch (schema.type) {
    case "string": return "text";
    case "integer": return "a whole number";
    case "number": return "a number";
    case "boolean": return "yes or no (true or false)";
    case "array": return `a list of ${answerType(schema.items)} (JSON)`;
    case "object": {
      const props = Object.entries(schema.properties || {});
      return props.length ? `an object (JSON) with ${props.map(([k, v]) => `${k}: ${answerType(v)}`).join("; ")}` : "an object (JSON)";
    }
    default: return JSON.stringify(schema);
  }
}
/* A run's error in words: its message, then what kind of failure it was. */
function errorWords(err) {
  if (!err) return "";
  const code = err.code ? String(err.code).replaceAll("_", " ") : "stopped";
  return `${code}${err.phase ? ` (in the ${err.phase} phase)` : ""}${err.message ? `: ${err.message}` : ""}`;
}
function ago(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}
function when(ts) { return new Date(ts * 1000).toLocaleString(); }
const FINISHED = new Set(["completed", "failed", "cancelled", "timed_out"]);
const RESUMABLE = new Set(["failed", "cancelled", "timed_out"]);

function stopPage() {
  pageCtl.abort();
  pageCtl = new AbortController();
  if (timer) clearInterval(timer);
  timer = null;
  if (stream) stream.abort();
  stream = null;
  document.getElementById("conn").classList.remove("live");
}

// -- login --------------------------------------------------------------------------------

function showLogin(message) {
  stopPage();
  const input = h("input", { type: "password", id: "token", autocomplete: "off", size: 40 });
  $main.replaceChildren(
    h("h1", {}, "Sign in"),
    h("div", { class: "card" },
      h("p", {}, message || "Paste the token `stead serve` printed (or the one you gave it)."),
      h("form", {
        onsubmit: (ev) => {
          ev.preventDefault();
          sessionStorage.setItem(TOKEN_KEY, input.value.trim());
          route();
        },
      }, h("label", {}, "Token", input), h("div", { class: "actions" },
        h("button", { class: "primary", type: "submit" }, "Open")))));
}

// -- runs list ----------------------------------------------------------------------------

async function runsPage(params) {
  const here = pageCtl.signal;
  const status = params.get("status") || "";
  const agent = params.get("agent") || "";
  const text = params.get("q") || "";
  const from = params.get("from") || "";
  const until = params.get("until") || "";
  const statusSel = h("select", { id: "f-status", onchange: () => setFilters() },
    h("option", { value: "" }, "any"),
    ["queued", "running", "awaiting_tool", "awaiting_approval", "completed", "failed",
     "cancelled", "timed_out"].map((s) => h("option", { value: s, selected: s === status }, s.replaceAll("_", " "))));
  const agentSel = h("select", { id: "f-agent", onchange: () => setFilters() },
    h("option", { value: "" }, "any"));
  const search = h("input", { id: "q", type: "search", value: text, placeholder: "run id, conversation or words of the input or output" });
  const local = (epoch) => epoch ? new Date(epoch * 1000 - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 16) : "";
  const fromIn = h("input", { id: "f-from", type: "datetime-local", value: local(Number(from)), onchange: () => setFilters() });
  const untilIn = h("input", { id: "f-until", type: "datetime-local", value: local(Number(until)), onchange: () => setFilters() });
  function setFilters() {
    const q = new URLSearchParams();
    if (statusSel.value) q.set("status", statusSel.value);
    if (agentSel.value) q.set("agent", agentSel.value);
    if (search.value.trim()) q.set("q", search.value.trim());
    if (fromIn.value) q.set("from", String(Math.floor(new Date(fromIn.value).getTime() / 1000)));
    if (untilIn.value) q.set("until", String(Math.floor(new Date(untilIn.value).getTime() / 1000)));
    location.hash = `#/runs${q.toString() ? "?" + q : ""}`;
  }
  const body = h("tbody", {});
  const more = h("button", { id: "more", hidden: true }, "Load more");
  const empty = h("p", { class: "muted", hidden: true, id: "runs-empty" }, "No runs match.");
  const selected = new Set();
  const cancelSel = h("button", { class: "danger", id: "cancel-selected", disabled: true, onclick: async () => {
    const ids = [...selected];
    const refused = [];
    for (const id of ids) {
      try { await api(`/runs/${encodeURIComponent(id)}/cancel`, { method: "POST", body: { reason: "cancelled from the runs list" } }); }
      catch (e) { refused.push(`${shortId(id)}: ${e.message}`); }
    }
    selected.clear(); cancelSel.disabled = true; cancelSel.textContent = "Cancel selected";
    toast(`cancel requested for ${ids.length - refused.length} of ${ids.length}` + (refused.length ? `; ${refused.join("; ")}` : ""));
    load();
  } }, "Cancel selected");
  const startAgent = h("select", { id: "start-agent", "aria-label": "agent" });
  const startInput = h("textarea", { id: "start-input", rows: 2, "aria-label": "input", placeholder: "the message for the agent" });
  const startConv = h("input", { id: "start-conversation", placeholder: "conversation (optional)", "aria-label": "conversation" });
  const startOut = h("p", { class: "error-box", hidden: true });
  const startForm = h("details", { class: "card", id: "start" }, h("summary", {}, "Start a run"),
    h("form", { onsubmit: async (ev) => {
      ev.preventDefault();
      startOut.hidden = true;
      try {
        const run = await api("/runs", { method: "POST", body: { agent: startAgent.value, input: startInput.value, session_id: startConv.value.trim() } });
        location.hash = `#/runs/${encodeURIComponent(run.run_id)}`;
      } catch (e) { startOut.textContent = e.message; startOut.hidden = false; }
    } }, h("label", {}, "Agent", startAgent), h("label", {}, "Input", startInput), h("label", {}, "Conversation", startConv),
      h("div", { class: "actions" }, h("button", { class: "primary", type: "submit" }, "Start")), startOut));
  $main.replaceChildren(
    h("h1", {}, "Runs"),
    startForm,
    h("form", { class: "filters", onsubmit: (ev) => { ev.preventDefault(); setFilters(); } },
      h("label", { class: "search" }, "Search", search),
      h("label", {}, "Status", statusSel), h("label", {}, "Agent", agentSel),
      h("label", {}, "Created from", fromIn), h("label", {}, "until", untilIn),
      h("button", { type: "submit" }, "Find"), cancelSel),
    h("table", { class: "runs", id: "runs" },
      h("thead", {}, h("tr", {}, ["", "Run", "Status", "Agent", "Input → answer", "Conversation", "Age", "Duration",
        "Turns", "Tokens", "Cost"].map((t) => h("th", {}, t)))),
      body),
    empty, h("div", { class: "actions" }, more));
  api("/agents").then((agents) => {
    for (const a of agents) {
      agentSel.append(h("option", { value: a.name, selected: a.name === agent }, a.name));
      startAgent.append(h("option", { value: a.name }, a.name));
    }
    if (agent && !agents.some((a) => a.name === agent)) agentSel.append(h("option", { value: agent, selected: true }, agent));
    startForm.hidden = agents.length === 0;
  }).catch(() => {});
  let shown = 50;
  async function load() {
    const q = new URLSearchParams({ limit: String(shown) });
    if (status) q.set("status", status);
    if (agent) q.set("agent", agent);
    if (text) q.set("q", text);
    if (from) q.set("created_from", from);
    if (until) q.set("created_until", until);
    const page = await api(`/runs?${q}`);
    const now = Date.now() / 1000;
    body.replaceChildren(...page.runs.map((r) => h("tr", { "data-run": r.run_id },
      h("td", { class: "pick" }, FINISHED.has(r.status) ? null : h("input", { type: "checkbox", "aria-label": `select ${r.run_id}`, checked: selected.has(r.run_id), onchange: (ev) => {
        if (ev.target.checked) selected.add(r.run_id); else selected.delete(r.run_id);
        cancelSel.disabled = selected.size === 0;
        cancelSel.textContent = selected.size ? `Cancel selected (${selected.size})` : "Cancel selected";
      } })),
      h("td", { "data-label": "Run" }, h("a", { class: "id", href: `#/runs/${encodeURIComponent(r.run_id)}`, title: r.run_id }, shortId(r.run_id))),
      h("td", { "data-label": "Status" }, r.damaged
        ? h("span", { class: "badge s-damaged", title: r.damaged }, "damaged")
        : badge(r.status),
        r.error_code ? h("span", { class: "code" }, " ", r.error_code.replaceAll("_", " ")) : null,
        r.waiting_s != null ? h("span", { class: "waiting" }, ` waiting ${ago(r.waiting_s)}`) : null,
        r.waited_s ? h("span", { class: "waiting waited", title: "the time it waited on a person, in all" }, ` waited ${secs(r.waited_s)}`) : null),
      h("td", { "data-label": "Agent" }, r.agent),
      h("td", { class: "texts" }, h("div", { class: "in" }, r.input_preview || "—"),
        r.output_preview ? h("div", { class: "out" }, "→ ", r.output_preview) : null),
      h("td", { "data-label": "Conversation" }, r.session_id ? h("a", { href: `#/chat/${encodeURIComponent(r.session_id)}` }, r.session_id) : "—"),
      h("td", { "data-label": "Age", class: "num", title: when(r.created_at) }, ago(now - r.created_at)),
      h("td", { "data-label": "Duration", class: "num" }, secs(r.updated_at - r.created_at)),
      h("td", { "data-label": "Turns", class: "num" }, num(r.turns)),
      h("td", { "data-label": "Tokens", class: "num" }, num(tokens(r.usage))),
      h("td", { "data-label": "Cost", class: "num" }, money(r.cost_usd)))));
    empty.hidden = page.runs.length > 0;
    more.hidden = !page.next_cursor;
  }
  more.addEventListener("click", () => { shown += 50; load(); });
  await load();
  if (here.aborted) return;
  timer = setInterval(() => load().catch(() => {}), 2000);
}

// -- the state diagram --------------------------------------------------------------------

const LAYOUT = {
  queued: [70, 150], running: [230, 150], awaiting_tool: [410, 60],
  awaiting_approval: [410, 240], completed: [610, 30], failed: [610, 110],
  cancelled: [610, 190], timed_out: [610, 270],
};
const NODE_W = 132, NODE_H = 30;

function clip(x1, y1, x2, y2) {
  const dx = x2 - x1, dy = y2 - y1;
  const t = Math.min(NODE_W / 2 / Math.abs(dx || 1e-9), NODE_H / 2 / Math.abs(dy || 1e-9));
  return [x1 + dx * t, y1 + dy * t];
}

function diagram(states, path, current) {
  const taken = new Set();
  for (let i = 1; i < path.length; i++) taken.add(`${path[i - 1]}>${path[i]}`);
  const visited = new Set(path);
  const defs = svg("defs", {},
    ["arrow", "arrow-taken"].map((id) => svg("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5,
      markerWidth: 8, markerHeight: 8, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z", fill: id === "arrow" ? "#c9c9c2" : "#2456a6" }))));
  const edges = states.transitions.map(([a, b]) => {
    const [ax, ay] = LAYOUT[a], [bx, by] = LAYOUT[b];
    const [sx, sy] = clip(ax, ay, bx, by), [ex, ey] = clip(bx, by, ax, ay);
    // Bow each edge to its left, so a -> b and b -> a do not overlap.
    const mx = (sx + ex) / 2, my = (sy + ey) / 2, len = Math.hypot(ex - sx, ey - sy) || 1;
    const cx = mx - ((ey - sy) / len) * 18, cy = my + ((ex - sx) / len) * 18;
    const on = taken.has(`${a}>${b}`);
    return svg("path", { class: on ? "edge taken" : "edge", d: `M${sx},${sy} Q${cx},${cy} ${ex},${ey}` },
      svg("title", {}, `${a} → ${b}`));
  });
  const nodes = states.states.map((s) => {
    const [x, y] = LAYOUT[s] || [0, 0];
    const cls = s === current ? "node current" : visited.has(s) ? "node visited" : "node";
    return svg("g", { class: cls, "data-state": s },
      svg("rect", { x: x - NODE_W / 2, y: y - NODE_H / 2, width: NODE_W, height: NODE_H, rx: 8 }),
      svg("text", { x, y: y + 4 }, s.replace("_", " ")));
  });
  return svg("svg", { class: "diagram", id: "diagram", viewBox: "0 0 700 300", role: "img",
    "aria-label": `state diagram; path: ${path.join(" → ")}` }, defs, edges, nodes);
}

// -- approvals (the inbox and a run's page share these cards) -----------------------------

async function toolSchema(agent, tool) {
  if (!schemaCache) schemaCache = await api("/agents");
  const a = schemaCache.find((x) => x.name === agent);
  const t = a && a.tools.find((x) => x.name === tool);
  return t ? t.parameters : null;
}

/* A first check in the browser; the server checks again against the tool's real schema. */
function checkArgs(value, schema) {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "arguments must be a JSON object";
  if (!schema) return null;
  for (const name of schema.required || []) if (!(name in value)) return `missing ${name}`;
  const props = schema.properties || {};
  for (const [k, v] of Object.entries(value)) {
    const p = props[k];
    if (!p) { if (schema.additionalProperties === false) return `unknown argument ${k}`; continue; }
    const type = p.type;
    const ok = type === undefined
      || (type === "integer" && Number.isInteger(v)) || (type === "number" && typeof v === "number")
      || (type === "string" && typeof v === "string") || (type === "boolean" && typeof v === "boolean")
      || (type === "array" && Array.isArray(v)) || (type === "object" && typeof v === "object" && v !== null && !Array.isArray(v))
      || (Array.isArray(type));
    if (!ok) return `${k} must be ${type}`;
  }
  return null;
}

function approvalCard(a, after) {
  const out = h("p", { class: "error-box", hidden: true });
  const base = `/runs/${encodeURIComponent(a.run_id)}/approvals/${encodeURIComponent(a.tool_call_id)}`;
  async function send(action, body) {
    out.hidden = true;
    try {
      await api(`${base}/${action}`, { method: "POST", body });
      toast(`${action === "answer" ? body.decision : action + "d"}: ${a.tool} in ${shortId(a.run_id)}`);
      after();
    } catch (e) { out.textContent = e.message; out.hidden = false; }
  }
  const reason = h("input", { placeholder: "reason (the model reads it)", class: "reason", size: 30 });
  const children = [
    h("div", {}, h("strong", {}, a.tool), " ", a.reason === "question" ? null : effect(a.effect_class), " ",
      h("span", { class: "muted" }, { policy: "needs approval", question: "asks you a question" }[a.reason] || "outcome unknown: did it happen?"), " · ",
      h("a", { class: "id", href: `#/runs/${encodeURIComponent(a.run_id)}` }, shortId(a.run_id)),
      " ", h("span", { class: "muted" }, a.agent)),
    a.payload.question ? h("p", { class: "question" }, a.payload.question) : null,
    a.reason === "question" ? null : h("pre", { class: "args" }, pretty(a.arguments)),
    a.deadline ? h("p", { class: "muted" }, `decide before ${when(a.deadline)}`) : null,
  ];
  if (a.reason === "policy") {
    const editor = h("textarea", { class: "edit", hidden: true, "aria-label": "edited arguments" }, pretty(a.arguments));
    const editBtn = h("button", { class: "edit-btn", onclick: () => { editor.hidden = !editor.hidden; } }, "Edit arguments");
    children.push(editor, h("div", { class: "actions" },
      h("button", { class: "primary approve", onclick: async () => {
        const body = { reason: reason.value };
        if (!editor.hidden) {
          let value;
          try { value = JSON.parse(editor.value); } catch (e) { out.textContent = `not JSON: ${e.message}`; out.hidden = false; return; }
          const problem = checkArgs(value, a.parameters || await toolSchema(a.agent, a.tool));
          if (problem) { out.textContent = problem; out.hidden = false; return; }
          body.arguments = value;
        }
        send("approve", body);
      } }, "Approve"),
      editBtn, reason,
      h("button", { class: "danger deny", onclick: () => {
        if (!reason.value.trim()) { out.textContent = "say why: the model reads the reason"; out.hidden = false; return; }
        send("deny", { reason: reason.value });
      } }, "Deny")));
  } else if (a.reason === "question") {
    // The answer goes as typed: the server checks it against the answer type (JSON for a
    // typed answer), and a misfit is shown here while the run keeps waiting.
    const answer = h("textarea", { class: "answer", rows: 2, "aria-label": "your answer", placeholder: "your answer" });
    const questions = `/runs/${encodeURIComponent(a.run_id)}/questions/${encodeURIComponent(a.tool_call_id)}`;
    children.push(h("p", { class: "answer-type" }, h("span", { class: "muted" }, "Answer: "), answerType(a.payload.answer_schema)), answer, h("div", { class: "actions" },
      h("button", { class: "primary answer-btn", onclick: async () => {
        out.hidden = true;
        try {
          await api(`${questions}/answer`, { method: "POST", body: { value: answer.value } });
          toast(`answered: ${a.tool} in ${shortId(a.run_id)}`);
          after();
        } catch (e) { out.textContent = e.message; out.hidden = false; }
      } }, "Answer")));
  } else {
    const result = h("textarea", { class: "result", placeholder: "what it returned (for happened)" });
    children.push(result, h("div", { class: "actions" },
      h("button", { class: "primary", onclick: () => send("answer", { decision: "happened", result: result.value || null, reason: reason.value }) }, "It happened"),
      h("button", { onclick: () => send("answer", { decision: "not_happened", reason: reason.value }) }, "It did not happen"),
      h("button", { onclick: () => send("answer", { decision: "skip", reason: reason.value }) }, "Skip it"),
      reason));
  }
  children.push(out);
  return h("div", { class: "card approval", "data-call": a.tool_call_id, "data-run": a.run_id }, children);
}

async function inboxPage() {
  const here = pageCtl.signal;
  const list = h("div", { id: "inbox" });
  $main.replaceChildren(h("h1", {}, "Waiting on you"), list);
  let shownKey = null;
  async function load() {
    const items = await api("/approvals");
    showCount(items.length);
    const key = items.map((a) => `${a.run_id}/${a.tool_call_id}`).join(",");
    if (key === shownKey) return; // keep what a person is typing
    shownKey = key;
    list.replaceChildren(...(items.length ? items.map((a) => approvalCard(a, () => { shownKey = null; load(); }))
      : [h("p", { class: "muted", id: "inbox-empty" }, "Nothing waits on you.")]));
  }
  await load();
  if (here.aborted) return;
  timer = setInterval(() => load().catch(() => {}), 2000);
}

// -- a run's page -------------------------------------------------------------------------

/* "fork after this turn": a new run whose history is this run's through this turn, then a
   new message (POST /runs/{id}/fork); nothing carried runs again. */
function forkButton(runId, turn) {
  if (!runId) return null;
  return h("button", { class: "fork", "data-turn": turn, title: `a new run from turns 1-${turn + 1}, then a new message`, onclick: async () => {
    const input = prompt(`Fork after turn ${turn + 1}: the new message`);
    if (!input) return;
    try {
      const fork = await api(`/runs/${encodeURIComponent(runId)}/fork`, { method: "POST", body: { at_turn: turn, input } });
      location.hash = `#/runs/${encodeURIComponent(fork.run_id)}`;
    } catch (err) { toast(err.message); }
  } }, "fork after this turn");
}

const VERDICT_WORDS = {
  keep: "its executor still has it: left to finish",
  defer: "its executor was asked to recover it: waiting for that",
  dispose: "no executor has it: its outcome is unknown",
  redispatch: "no executor has it: sent again",
};

function describe(e, state) {
  const d = e.data;
  const at = h("span", { class: "at" }, `#${e.seq} · ${new Date(e.at * 1000).toLocaleTimeString()}`);
  const li = (cls, what, ...rest) => h("li", { class: cls, "data-kind": e.kind, "data-seq": e.seq },
    h("span", { class: "what" }, what), at, ...rest);
  switch (e.kind) {
    case "run_created": return li("", "created", h("pre", {}, d.input));
    case "run_started": return li("", `started by ${d.owner} (epoch ${d.epoch})`);
    case "run_recovered": return li("recovery", `recovered: ${d.owner} took over from ${d.previous_owner || "a stopped worker"} (epoch ${d.epoch})`);
    case "turn_started": return li("turn", "model called", forkButton(state.runId, d.turn_index));
    case "run_forked": return li("recovery", "forked from ",
      h("a", { class: "id", href: `#/runs/${encodeURIComponent(d.source_run_id)}` }, shortId(d.source_run_id)),
      ` after turn ${d.at_turn + 1} (${d.carried_results} results carried` + (d.dropped_calls ? `, ${d.dropped_calls} in-flight calls not carried)` : ")"));
    case "agent_recorded": return li("", `agent version ${d.fingerprint}${d.version ? ` (${d.version})` : ""}`);
    case "agent_changed": return li("recovery", `agent changed: ${d.from_fingerprint}${d.from_version ? ` (${d.from_version})` : ""} → ${d.to_fingerprint}${d.to_version ? ` (${d.to_version})` : ""}`);
    case "turn_resumed": return li("recovery", `turn ${d.turn_index + 1} resumed after a restart`);
    case "notice_injected": return li("", `notice: ${d.reason}`, h("pre", {}, d.content));
    case "model_call_failed": return li("bad", `model call failed (attempt ${d.attempt}): ${d.code}`, d.message ? h("pre", {}, d.message) : null);
    case "assistant_message": {
      const u = d.usage || {};
      return li("", "assistant",
        d.message.text ? h("div", { class: "reply" }, d.message.text) : null,
        h("div", { class: "usage" }, `${d.model || "model"} · in ${num(u.input_tokens)} · out ${num(u.output_tokens)}`
          + (u.cache_read_input_tokens ? ` · cache read ${num(u.cache_read_input_tokens)}` : "") + ` · ${money(e.cost_usd)}`));
    }
    case "tool_call_requested": {
      state.effects[d.tool_call_id] = d.effect_class;
      if (d.final) {
        state.kinds[d.tool_call_id] = "output";
        let fields = {};
        try { fields = JSON.parse(d.arguments); } catch { fields = { answer: d.arguments }; }
        return li("done output", "the typed answer", h("dl", { class: "kv" },
          Object.entries(fields).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, typeof v === "string" ? v : JSON.stringify(v))])));
      }
      const item = li(d.rejection ? "bad" : "", `call ${d.name}`, " ", effect(d.effect_class),
        d.requires_approval ? h("span", { class: "badge s-awaiting_approval" }, "needs approval") : null,
        h("pre", { class: "args" }, pretty(d.arguments)), d.rejection ? h("div", {}, `refused: ${d.rejection}`) : null);
      state.calls[d.tool_call_id] = item;
      return item;
    }
    case "loop_detected": return li("bad", `loop: ${d.name} repeated ${d.repeats} times`);
    case "tool_call_started": return li("", `${d.tool_call_id} started (attempt ${d.attempt})`);
    case "tool_result_recorded":
      if (state.kinds[d.tool_call_id] === "output") return li("done output", "typed answer recorded");
      if (state.kinds[d.tool_call_id] === "question") {
        let said = d.content;
        try { const v = JSON.parse(d.content); said = typeof v === "string" ? v : JSON.stringify(v); } catch { /* as given */ }
        return li(d.is_error ? "bad" : "person", `answer: ${said}`);
      }
      return li(d.is_error ? "bad" : "done", `result of ${d.name}`, " ", effect(state.effects[d.tool_call_id]), " ",
        h("span", { class: "badge" }, d.source || "executed"), h("pre", { class: "result" }, pretty(d.content)));
    case "tool_outcome_unknown": return li("recovery", `outcome of ${d.tool_call_id} unknown: ${d.reason}`);
    case "effect_reconciled": {
      // What a takeover did with a step the dead worker left, in the CLI timeline's words.
      const what = d.tool_call_id ? `call ${d.tool_call_id}` : `model call of turn ${d.turn_index + 1}`;
      const words = d.verdict === "dispose" && !d.tool_call_id ? "no executor has it: the turn asks the model again"
        : VERDICT_WORDS[d.verdict] || d.verdict;
      return li("recovery", `the dead worker's ${what}: ${words}`);
    }
    case "tool_reconciled": return li("recovery", `reconciled ${d.tool_call_id}: ${d.verdict === "done" ? "it had happened" : d.verdict === "not_done" ? "it had not happened" : "could not tell"}`);
    case "approval_requested":
      if (d.reason === "question") {
        state.kinds[d.tool_call_id] = "question";
        const asked = state.calls[d.tool_call_id];
        if (asked) asked.replaceChildren(h("span", { class: "what" }, `question to a person (${d.payload?.tool || "ask"})`), at.cloneNode(true));
        return li("person", `question "${(d.payload || {}).question}"`, " ",
          h("span", { class: "muted" }, `answer: ${answerType((d.payload || {}).answer_schema)}`));
      }
      return li("person", `waiting on a person: ${{ policy: "approve ", question: `question "${(d.payload || {}).question}" ` }[d.reason] || "did it happen? "}${d.tool_call_id}`);
    case "approval_decided": return li("person", `${d.decision} by ${d.by || "someone"}${d.reason ? `: ${d.reason}` : ""}`, d.arguments ? h("pre", {}, pretty(d.arguments)) : null);
    case "run_completed": return li("done", "completed (the answer is at the top)");
    case "run_failed": return li("bad", `failed: ${errorWords(d)}`);
    case "run_cancel_requested": return li("bad", `cancel requested${d.by ? " by " + d.by : ""}: ${d.reason}`);
    case "run_cancelled": return li("bad", `cancelled: ${d.reason}`);
    case "run_timed_out": return li("bad", `timed out: ${d.reason}`);
    case "run_requeued": return li("recovery", `requeued: ${d.reason}`);
    default: return li("", e.kind, h("pre", {}, JSON.stringify(d, null, 2)));
  }
}

/* SSE over fetch (EventSource cannot send an Authorization header). */
async function follow(runId, after, onEvent, onProgress, onEnd) {
  const ctl = new AbortController();
  stream = ctl;
  const conn = document.getElementById("conn");
  let last = after;
  while (!ctl.signal.aborted) {
    try {
      const r = await fetch(`/runs/${encodeURIComponent(runId)}/events`, {
        headers: { Authorization: `Bearer ${token()}`, Accept: "text/event-stream", "Last-Event-ID": String(last) },
        signal: ctl.signal,
      });
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      conn.classList.add("live");
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, cut); buf = buf.slice(cut + 2);
          const msg = {};
          for (const line of block.split("\n")) {
            if (!line || line.startsWith(":")) continue;
            const i = line.indexOf(":");
            const k = i < 0 ? line : line.slice(0, i);
            const v = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
            msg[k] = msg[k] ? msg[k] + "\n" + v : v;
          }
          if (msg.event === "event") { last = Number(msg.id); onEvent(JSON.parse(msg.data)); }
          else if (msg.event === "progress") onProgress(JSON.parse(msg.data));
          else if (msg.event === "end") { conn.classList.remove("live"); onEnd(); return; }
        }
      }
    } catch (e) {
      if (ctl.signal.aborted) return;
    }
    conn.classList.remove("live");
    await new Promise((r) => setTimeout(r, 1000)); // then resume from the last seq seen
  }
}

/* The run on one time axis: a row a model call and a row a tool call, each bar placed by
   when it started and ended (GET /runs/{id}/steps; a call from when the model asked for it
   to its result, a wait on a person included), so parallel calls overlap, a slow tool and
   a long wait on a person stand out, and the gaps between steps show. Times are the
   store's; a step still going runs to the latest time the log knows. */
function waterfall(steps, open) {
  const t0 = steps.created_at;
  const rows = [];
  for (const t of steps.turns) {
    const failed = t.model_attempts > 1 ? ` · ${t.model_attempts} attempts` + (t.model_failure ? `, last failure ${t.model_failure}` : "") : "";
    rows.push({ kind: "model", turn: t.turn_index, label: `${t.turn_index + 1} · model`,
      start: t.started_at, end: t.model_s === null ? null : t.started_at + t.model_s,
      title: `turn ${t.turn_index + 1}: ${t.model || "model"}${failed}` });
    for (const c of t.calls) {
      const kind = c.kind === "question" || c.waited_s > 0 ? "person" : c.kind === "output" ? "output" : "tool";
      const failure = c.last_failure ? ` · ${c.attempts > 1 ? `${c.attempts} attempts, ` : ""}last failure ${c.last_failure}` : "";
      rows.push({ kind, turn: t.turn_index, label: `${t.turn_index + 1} · ${c.kind === "question" ? "question" : c.name}`,
        start: c.requested_at, end: c.ended_at,
        title: `${c.name} (${c.status})${c.waited_s > 0 ? ` · waited on a person ${secs(c.waited_s)}` : ""}${failure}` });
    }
  }
  if (!rows.length) return h("div", { id: "waterfall", hidden: true }); // nothing ran yet
  const known = rows.flatMap((r) => [r.start, r.end ?? r.start]);
  const last = steps.ended_at ?? Math.max(t0, ...known);
  const span = Math.max(last - t0, 1e-3);
  const at = (x) => Math.min(100, Math.max(0, (100 * (x - t0)) / span));
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => h("span", { class: "wf-tick", style: `left:${100 * f}%` }, secs(f * span)));
  const list = h("ol", { class: "wf-rows" }, rows.map((r) => {
    const left = at(r.start), right = at(r.end ?? last);
    const dur = (r.end ?? last) - r.start;
    return h("li", { class: `wf-row k-${r.kind}${r.end === null ? " going" : ""}`, "data-turn": r.turn + 1, "data-kind": r.kind,
        "data-start": r.start - t0, "data-end": (r.end ?? last) - t0 },
      h("button", { class: "wf-label", type: "button", title: `open turn ${r.turn + 1}`, onclick: () => open(r.turn + 1) }, r.label),
      h("span", { class: "wf-track" }, h("span", { class: "wf-bar", style: `left:${left}%;width:${Math.max(right - left, 0)}%`,
        title: `${r.title} · ${secs(dur)}, from ${secs(r.start - t0)}` })));
  }));
  return h("details", { class: "card waterfall", id: "waterfall", open: true },
    h("summary", {}, `Where the time went: ${secs(span)}`, steps.waited_s > 0 ? `, ${secs(steps.waited_s)} of it waiting on a person` : "",
      h("span", { class: "wf-legend" }, h("span", { class: "k-model" }, "model"), h("span", { class: "k-tool" }, "tool"),
        h("span", { class: "k-person" }, "a person"))),
    h("div", { class: "wf-axis" }, h("span", { class: "wf-label" }), h("span", { class: "wf-track" }, ticks)), list);
}

async function runPage(runId) {
  const here = pageCtl.signal;
  const [states, run] = await Promise.all([api("/states"), api(`/runs/${encodeURIComponent(runId)}`)]);
  if (here.aborted) return; // another page was asked for meanwhile: it is the one shown
  const head = h("div", {});
  const diagramBox = h("div", { class: "card" });
  const approvalsBox = h("div", { id: "run-approvals" });
  const timeline = h("ol", { class: "timeline", id: "timeline" });
  const live = h("div", { class: "live-text", id: "live-text", hidden: true });
  const jump = h("input", { id: "jump", type: "number", min: 1, placeholder: "turn", "aria-label": "turn number", size: 5 });
  const jumpForm = h("form", { class: "jump", onsubmit: (ev) => { ev.preventDefault(); openTurn(Number(jump.value)); } },
    h("label", {}, "Jump to turn", jump), h("button", { type: "submit" }, "Go"));
  const earlier = h("div", {});
  earlierMessages(runId, run.session_id, earlier);
  const waterfallBox = h("div", { id: "waterfall-box" });
  const treeBox = h("div", { id: "run-tree" });
  $main.replaceChildren(head, live, approvalsBox, treeBox, earlier, waterfallBox, h("h2", {}, "Timeline"), jumpForm, timeline,
    h("h2", {}, "Path through the state machine"), diagramBox);
  const state = { effects: {}, kinds: {}, calls: {}, liveTurn: null, liveGen: 0, runId };

  function render(r) {
    const buttons = [];
    if (!FINISHED.has(r.status)) buttons.push(h("button", { class: "danger", id: "cancel", onclick: async () => {
      try { await api(`/runs/${encodeURIComponent(runId)}/cancel`, { method: "POST", body: { reason: "cancelled from the dashboard" } }); toast("cancel requested"); refresh(); }
      catch (e) { toast(e.message); } } }, "Cancel"));
    if (RESUMABLE.has(r.status) && !r.resume_refusal) buttons.push(h("button", { class: "primary", id: "resume", onclick: async () => {
      try { await api(`/runs/${encodeURIComponent(runId)}/resume`, { method: "POST", body: {} }); toast("requeued"); refresh(); start(); }
      catch (e) { toast(e.message); } } }, "Resume"));
    head.replaceChildren(
      h("h1", {}, h("span", { class: "id" }, r.run_id), " ", h("span", { id: "run-status" }, badge(r.status))),
      h("div", { class: "card" }, h("dl", { class: "kv" },
        h("dt", {}, "agent"), h("dd", {}, r.agent),
        h("dt", {}, "conversation"), h("dd", {}, r.session_id ? h("a", { id: "run-chat", href: `#/chat/${encodeURIComponent(r.session_id)}` }, r.session_id) : "—"),
        h("dt", {}, "created"), h("dd", {}, `${when(r.created_at)} (${ago(Date.now() / 1000 - r.created_at)} ago)`),
        h("dt", {}, "duration"), h("dd", {}, secs(r.updated_at - r.created_at)),
        r.waiting_s != null ? [h("dt", {}, "waiting on you"), h("dd", {}, ago(r.waiting_s))] : null,
        h("dt", {}, "turns"), h("dd", {}, num(r.turns)),
        h("dt", {}, "tokens"), h("dd", {}, `in ${num(r.usage.input_tokens)} · out ${num(r.usage.output_tokens)}`),
        h("dt", {}, "cost"), h("dd", {}, money(r.cost_usd)),
        h("dt", {}, "driven by"), h("dd", {}, r.leased_by || "nobody now"),
        r.output !== null && r.data == null ? [h("dt", {}, "answer"), h("dd", { id: "run-output", class: "prose" }, r.output)] : null,
        r.data != null ? [h("dt", {}, "answer"), h("dd", {}, h("pre", { id: "run-data" }, JSON.stringify(r.data, null, 2)))] : null,
        r.error ? [h("dt", {}, r.status === "failed" ? "why it failed" : "why it stopped"), h("dd", { class: "error-box", id: "run-error" }, errorWords(r.error))] : null),
        h("div", { class: "actions" }, buttons,
          RESUMABLE.has(r.status) && r.resume_refusal ? h("span", { class: "muted", id: "no-resume" }, `Not resumable: ${r.resume_refusal}`) : null)));
    approvalsBox.replaceChildren(...(r.approvals.length ? [h("h2", {}, "Waiting on a person"),
      ...r.approvals.map((a) => approvalCard(a, refresh))] : []));
    diagramBox.replaceChildren(diagram(states, r.path, r.status));
    runTree(runId, treeBox);
  }
  let pending = null;
  async function refresh() {
    if (pending) return;
    pending = setTimeout(async () => {
      pending = null;
      try { render(await api(`/runs/${encodeURIComponent(runId)}`)); } catch (e) { /* shown on next */ }
      drawWaterfall();
    }, 150);
  }
  let drawing = false, stale = false;
  async function drawWaterfall() {
    if (drawing) { stale = true; return; } // drawn again once this one is, from newer steps
    drawing = true;
    try { waterfallBox.replaceChildren(waterfall(await api(`/runs/${encodeURIComponent(runId)}/steps`), (n) => openTurn(n))); }
    catch (e) { /* drawn on the next event */ }
    finally { drawing = false; }
    if (stale) { stale = false; drawWaterfall(); }
  }
  render(run);
  /* Each turn is a block: a one-line summary (its model time, its calls, its tokens, a bar
     of model and tool time) over its events; a run of more than COLLAPSE turns shows only
     its latest turn open. */
  const COLLAPSE = 5;
  const turns = [];
  function place(e, item) {
    const d = e.data;
    if (e.kind === "turn_started" && !turns[d.turn_index]) {
      const line = h("span", { class: "turn-line" });
      const events = h("ol", { class: "turn-events" });
      const details = h("details", { open: true },
        h("summary", {}, h("span", { class: "what" }, `Turn ${d.turn_index + 1}`), " ", line), events);
      const block = h("li", { class: "turn-block", "data-turn": d.turn_index, id: `turn-${d.turn_index + 1}` }, details);
      turns[d.turn_index] = { block, details, events, line, start: e.at, model: null, tools: 0, calls: [], tokens: 0, asked: null, waited: 0 };
      item.classList.add("turn-start");
      events.append(item);
      timeline.append(block);
      jump.max = String(turns.length);
      if (turns.length > COLLAPSE) for (const t of turns.slice(0, -1)) if (t) t.details.open = false;
      return;
    }
    const t = d && d.turn_index !== undefined && d.turn_index !== null ? turns[d.turn_index] : null;
    if (!t) { timeline.append(item); return; }
    t.events.append(item);
    if (e.kind === "assistant_message") {
      t.model = e.at - t.start;
      t.tokens = (d.usage?.input_tokens || 0) + (d.usage?.output_tokens || 0);
    } else if (e.kind === "tool_call_requested" && !d.final) t.calls.push(d.name);
    else if (e.kind === "tool_result_recorded" && state.kinds[d.tool_call_id] !== "output") {
      t.tools = Math.max(t.tools, e.at - t.start - (t.model || 0) - t.waited);
    } else if (e.kind === "approval_requested") { t.details.open = true; t.asked = e.at; }
    else if (e.kind === "approval_decided" && t.asked !== null) { t.waited += e.at - t.asked; t.asked = null; }
    t.line.textContent = [t.model === null ? "model answering…" : `model ${secs(t.model)}`,
      t.calls.length ? `${t.calls.join(", ")} ${secs(t.tools)}` : null,
      t.waited ? `waited on a person ${secs(t.waited)}` : null,
      t.tokens ? `${num(t.tokens)} tokens` : null].filter(Boolean).join(" · ");
  }
  function openTurn(n) {
    const t = turns[n - 1];
    if (!t) { toast(`this run has no turn ${n} (it has ${turns.length})`); return; }
    t.details.open = true;
    t.block.scrollIntoView({ block: "start" });
    history.replaceState(null, "", `#/runs/${encodeURIComponent(runId)}?turn=${n}`);
  }
  const wanted = Number(new URLSearchParams(location.hash.split("?")[1] || "").get("turn") || 0);
  let seen = 0;
  function start() {
    if (stream) stream.abort();
    follow(runId, seen, (e) => {
      seen = e.seq;
      if (e.kind === "assistant_message" && e.data.turn_index === state.liveTurn) {
        live.hidden = true; live.textContent = ""; state.liveTurn = null;
      }
      place(e, describe(e, state));
      refresh();
    }, (p) => {
      if (p.reset || p.generation !== state.liveGen || p.turn_index !== state.liveTurn) {
        live.textContent = ""; state.liveGen = p.generation; state.liveTurn = p.turn_index;
      }
      if (p.text) { live.hidden = false; live.textContent += (p.gap ? " … " : "") + p.text; }
    }, () => { live.hidden = true; refresh(); if (wanted) openTurn(wanted); });
  }
  start();
}

// -- a run's tree of child runs ----------------------------------------------------------

/* The parent chain and the tree under the root (states, own and subtree tokens), each run a
   link to its page; nothing for a run outside any tree. */
async function runTree(runId, box) {
  let t;
  try { t = await api(`/runs/${encodeURIComponent(runId)}/tree`); } catch (e) { return; }
  if (!t.parents.length && !t.root.children.length) { box.replaceChildren(); return; }
  const link = (id) => h("a", { class: "id", href: `#/runs/${encodeURIComponent(id)}`, "data-run": id }, shortId(id));
  function node(n) {
    const here = n.run_id === t.run_id;
    const spent = `${num(tokens(n.usage))} tokens` + (n.children.length ? ` · with its children ${num(tokens(n.tree_usage))}` : "");
    return h("li", { class: here ? "tree-here" : null, "data-run": n.run_id },
      here ? h("strong", { class: "id" }, shortId(n.run_id)) : link(n.run_id), " ", n.agent, " ", badge(n.status), " ",
      h("span", { class: "muted" }, spent),
      n.children.length ? h("ul", {}, n.children.map(node)) : null);
  }
  box.replaceChildren(h("h2", {}, "Run tree"),
    t.parents.length ? h("p", { id: "tree-parents" }, "Started by ", t.parents.map((id, i) => [i ? " ← " : "", link(id)])) : null,
    h("ul", { class: "tree card", id: "tree" }, node(t.root)));
}

// -- a conversation -----------------------------------------------------------------------

function chatBubble(m) {
  const answer = m.data != null ? JSON.stringify(m.data, null, 2) : m.output;
  const state = m.status === null ? "waits for the message before it"
    : m.status === "awaiting_approval" ? "waits on you" : FINISHED.has(m.status) && answer === null ? m.status.replaceAll("_", " ") : "answering…";
  return h("li", { class: "chat-turn", "data-run": m.run_id, "data-position": m.position },
    h("div", { class: "bubble user" }, m.text),
    h("div", { class: "bubble agent" + (answer === null ? " pending" : "") },
      answer !== null ? answer : h("span", { class: "muted" }, state), " ",
      h("a", { class: "id small", href: `#/runs/${encodeURIComponent(m.run_id)}` }, shortId(m.run_id))));
}

async function chatPage(conversation) {
  const here = pageCtl.signal;
  const list = h("ol", { class: "chat", id: "chat" });
  const box = h("textarea", { id: "chat-input", rows: 2, "aria-label": "your message", placeholder: "your message" });
  const agentSel = h("select", { id: "chat-agent", "aria-label": "agent" });
  const out = h("p", { class: "error-box", hidden: true });
  let agent = null;
  const form = h("form", { class: "chat-form card", onsubmit: async (ev) => {
    ev.preventDefault();
    const text = box.value.trim();
    if (!text) return;
    out.hidden = true;
    try {
      const sent = await api(`/conversations/${encodeURIComponent(conversation)}/messages`,
        { method: "POST", body: { text, agent: agent || agentSel.value } });
      box.value = "";
      await load();
      waitFor(sent.run_id);
    } catch (e) { out.textContent = e.message; out.hidden = false; }
  } }, agentSel, box, h("div", { class: "actions" }, h("button", { class: "primary", type: "submit", id: "chat-send" }, "Send")), out);
  $main.replaceChildren(h("h1", {}, "Conversation ", h("span", { class: "id" }, conversation)), list, form);
  /* Long-poll the run until it rests (GET /runs/{id}/wait answers 204 until then). */
  async function waitFor(runId) {
    while (!here.aborted) {
      let r;
      try {
        r = await fetch(`/runs/${encodeURIComponent(runId)}/wait?timeout=20`, { headers: { Authorization: `Bearer ${token()}` }, signal: here });
      } catch (e) {
        if (here.aborted) return; // left this page: the long poll is closed, not left to hold a connection
        r = null;
      }
      if (r && r.status === 200) break;
      if (!r || r.status !== 204) { await new Promise((ok) => setTimeout(ok, 1000)); }
    }
    if (!here.aborted) await load();
  }
  let shown = "";
  async function load() {
    const c = await api(`/conversations/${encodeURIComponent(conversation)}`);
    if (c.messages.length) agent = c.messages[c.messages.length - 1].agent;
    agentSel.hidden = agent !== null;
    const key = JSON.stringify(c.messages.map((m) => [m.run_id, m.status, m.output]));
    if (key === shown) return;
    shown = key;
    list.replaceChildren(...(c.messages.length ? c.messages.map(chatBubble)
      : [h("li", { class: "muted" }, "No messages yet: the first one starts the conversation.")]));
  }
  if (agentSel) {
    const agents = await api("/agents");
    for (const a of agents) agentSel.append(h("option", { value: a.name }, a.name));
  }
  await load();
  if (here.aborted) return;
  timer = setInterval(() => load().catch(() => {}), 2000);
}

/* A run of a conversation: the messages before it, collapsed, above its timeline. */
async function earlierMessages(runId, conversation, into) {
  if (!conversation) return;
  try {
    const c = await api(`/conversations/${encodeURIComponent(conversation)}`);
    const i = c.messages.findIndex((m) => m.run_id === runId);
    const before = i < 0 ? [] : c.messages.slice(0, i);
    if (!before.length) return;
    into.replaceChildren(h("details", { class: "card", id: "earlier" },
      h("summary", {}, `Earlier in this conversation (${before.length} message${before.length > 1 ? "s" : ""})`),
      h("ol", { class: "chat" }, before.map(chatBubble))));
  } catch { /* a server without conversations: nothing to show */ }
}

// -- routing ------------------------------------------------------------------------------

async function route() {
  stopPage();
  // A link may carry the token: #token=T, #/runs/ID?token=T, #/runs/ID&token=T or
  // #token=T&/runs/ID. The token goes to this tab's storage; the route stays in the address.
  const m = location.hash.match(/[#?&]token=([^&]*)/);
  if (m) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    let rest = location.hash.replace(m[0], m[0][0] === "#" ? "#" : "").replace(/^#&/, "#").replace(/[?&]$/, "");
    if (!rest.startsWith("#/")) rest = "#/runs";
    history.replaceState(null, "", location.pathname + rest);
  }
  if (!token()) { showLogin(); return; }
  const hash = location.hash.replace(/^#/, "") || "/runs";
  const [path, query] = hash.split("?");
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", hash.startsWith(a.getAttribute("href").slice(1)));
  try {
    if (path.startsWith("/runs/")) await runPage(decodeURIComponent(path.slice(6)));
    else if (path === "/inbox") await inboxPage();
    else if (path.startsWith("/chat/")) await chatPage(decodeURIComponent(path.slice(6)));
    else await runsPage(new URLSearchParams(query || ""));
  } catch (e) {
    if (e.message !== "unauthorized") $main.replaceChildren(h("div", { class: "card error-box" }, e.message));
  }
}

function showCount(n) {
  const c = document.getElementById("inbox-count");
  c.textContent = String(n);
  c.hidden = n === 0;
}

async function inboxCount() {
  if (!token()) return;
  try { showCount((await api("/approvals")).length); } catch { /* the page says why */ }
}

window.addEventListener("hashchange", route);
route();
setInterval(inboxCount, 3000);
inboxCount();
