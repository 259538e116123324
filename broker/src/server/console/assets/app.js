// Strom console: a single page over the admin port's JSON API (/api/v1, the same structs as
// `strom ... --format json`) and the broker's own /metrics for the sparklines. No build step,
// no dependencies: every string from the broker goes into the page through textContent.
"use strict";

const app = document.getElementById("app");

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

async function api(path, opts) {
  const r = await fetch(path, opts);
  const body = await r.json().catch(() => null);
  if (!r.ok) {
    const e = body && body.error;
    throw new Error(e ? e.message + (e.hint ? " — " + e.hint : "") : `${r.status} ${r.statusText}`);
  }
  return body;
}

function table(headers, rows, attrs) {
  // A column is numeric (right-aligned) when its cells are: the header follows the first row.
  const first = rows[0] && rows[0].children;
  const num = (i) => (first && first[i] && first[i].classList.contains("num") ? "num" : null);
  return h("table", attrs || {},
    h("thead", {}, h("tr", {}, headers.map((c, i) => h("th", { class: num(i) }, c)))),
    h("tbody", {}, rows));
}

const num = (v) => (v === null || v === undefined ? "–" : Number(v).toLocaleString("en-US"));
const td = (v, cls) => h("td", { class: cls }, v === null || v === undefined ? "–" : v);
const tdn = (v) => td(num(v), "num");
const enc = encodeURIComponent;

function errorBox(e) {
  return h("div", { class: "error", "data-test": "error" }, String(e.message || e));
}

// ------------------------------------------------------------------ metrics and sparklines

const HISTORY = 60;
const series = { produced: [], fetched: [], lag: [] };
let lastSample = null;

function parseMetrics(text) {
  const sums = {};
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/);
    if (!m) continue;
    sums[m[1]] = (sums[m[1]] || 0) + Number(m[3]);
  }
  return sums;
}

async function sample() {
  try {
    const text = await (await fetch("/metrics")).text();
    const s = parseMetrics(text);
    const now = Date.now();
    if (lastSample) {
      const dt = (now - lastSample.t) / 1000;
      const rate = (k) => Math.max(0, ((s[k] || 0) - (lastSample.s[k] || 0)) / dt);
      push("produced", rate("strom_produced_bytes_total"));
      push("fetched", rate("strom_fetched_bytes_total"));
    }
    push("lag", s.strom_consumer_group_lag || 0);
    lastSample = { t: now, s };
    document.querySelectorAll("[data-spark]").forEach((el) => drawSpark(el, series[el.dataset.spark]));
    document.querySelectorAll("[data-spark-value]").forEach((el) => {
      const v = series[el.dataset.sparkValue];
      el.textContent = v.length ? fmtRate(el.dataset.sparkValue, v[v.length - 1]) : "–";
    });
  } catch (_) {
    /* the next tick retries */
  }
}

function push(k, v) {
  series[k].push(v);
  if (series[k].length > HISTORY) series[k].shift();
}

function fmtRate(kind, v) {
  if (kind === "lag") return num(Math.round(v));
  const units = ["B/s", "KB/s", "MB/s", "GB/s"];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return v.toFixed(i ? 1 : 0) + " " + units[i];
}

function drawSpark(svg, values) {
  const w = 160, hgt = 32;
  const max = Math.max(1, ...values);
  const pts = values.map((v, i) => `${(i / Math.max(1, values.length - 1)) * w},${hgt - (v / max) * (hgt - 2) - 1}`);
  svg.setAttribute("viewBox", `0 0 ${w} ${hgt}`);
  svg.innerHTML = "";
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", pts.join(" "));
  line.setAttribute("fill", "none");
  line.setAttribute("stroke", "#0b6bcb");
  line.setAttribute("stroke-width", "1.5");
  svg.append(line);
  svg.dataset.points = String(values.length);
}

function sparkCard(label, kind) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("width", "160");
  svg.setAttribute("height", "32");
  svg.dataset.spark = kind;
  drawSpark(svg, series[kind]);
  return h("div", { class: "card", "data-test": `spark-${kind}` },
    h("div", { class: "label" }, label),
    h("div", { class: "value", "data-spark-value": kind }, "–"),
    svg);
}

// ------------------------------------------------------------------ pages

async function overview() {
  const [info, groups] = await Promise.all([api("/api/v1/cluster"), api("/api/v1/groups")]);
  return [
    h("h1", {}, "Overview"),
    h("div", { class: "cards" },
      h("div", { class: "card" }, h("div", { class: "label" }, "Brokers"), h("div", { class: "value", "data-test": "brokers" }, info.brokers.length)),
      h("div", { class: "card" }, h("div", { class: "label" }, "Topics"), h("div", { class: "value", "data-test": "topics" }, info.topics)),
      h("div", { class: "card" }, h("div", { class: "label" }, "Partitions"), h("div", { class: "value", "data-test": "partitions" }, info.partitions)),
      h("div", { class: "card" }, h("div", { class: "label" }, "Consumer groups"), h("div", { class: "value", "data-test": "groups" }, groups.length)),
      sparkCard("Produced", "produced"),
      sparkCard("Fetched", "fetched"),
      sparkCard("Consumer lag", "lag")),
    h("h2", {}, "Nodes"),
    table(["Node", "Host", "Port", "Rack", "Role"], info.brokers.map((b) => h("tr", {},
      td(b.node_id), td(b.host), td(b.port), td(b.rack), td(b.node_id === info.controller ? "controller" : "broker")))),
    h("p", { class: "muted" }, "Cluster id ", info.cluster_id || "–"),
  ];
}

async function topics() {
  const list = await api("/api/v1/topics?internal=true");
  return [
    h("h1", {}, "Topics"),
    table(["Name", "Partitions", "Replicas", "Internal"], list.map((t) => h("tr", { "data-topic": t.name },
      td(h("a", { href: `#/topics/${enc(t.name)}` }, t.name)), tdn(t.partitions), tdn(t.replication_factor), td(t.internal ? "yes" : "")))),
  ];
}

async function topicPage(name) {
  const d = await api(`/api/v1/topics/${enc(name)}`);
  const overridden = d.configs.filter((c) => c.source === "DYNAMIC_TOPIC_CONFIG");
  const browser = h("div", { id: "browser" });
  const out = [
    h("h1", {}, "Topic ", h("span", { "data-test": "topic-name" }, d.name)),
    h("p", { class: "muted" }, `id ${d.topic_id} · ${d.partitions.length} partitions`),
    h("h2", {}, "Partitions"),
    table(["Partition", "Leader", "Replicas", "ISR", "Log start", "High watermark"], d.partitions.map((p) => h("tr", {},
      tdn(p.partition), td(p.leader), td(p.replicas.join(", ")), td(p.isr.join(", ")), tdn(p.log_start_offset), tdn(p.high_watermark))), { "data-test": "partitions" }),
    h("h2", {}, "Messages"),
    browser,
    h("h2", {}, "Configs ", h("span", { class: "muted" }, `(${overridden.length} set on the topic)`)),
    table(["Key", "Value", "Source"], d.configs.map((c) => h("tr", { class: c.source === "DYNAMIC_TOPIC_CONFIG" ? "overridden" : null },
      td(c.name), td(c.sensitive ? "(sensitive)" : c.value), td(h("span", { class: c.source === "DYNAMIC_TOPIC_CONFIG" ? "pill warn" : "pill" }, c.source))))),
  ];
  messageBrowser(browser, d);
  return out;
}

function messageBrowser(root, d) {
  const part = h("select", { id: "mb-partition" }, d.partitions.map((p) => h("option", { value: p.partition }, `partition ${p.partition}`)));
  const offset = h("input", { id: "mb-offset", value: "start", size: 14, title: "start, end, an offset, or @timestamp-ms" });
  const time = h("input", { id: "mb-time", type: "datetime-local", title: "seek to the first record at or after this time" });
  const key = h("input", { id: "mb-key", placeholder: "key (exact)", size: 14 });
  const limit = h("select", { id: "mb-limit" }, [20, 50, 100, 500].map((n) => h("option", { value: n, selected: n === 50 }, n)));
  const decode = h("select", { id: "mb-decode" }, h("option", { value: "text" }, "text"), h("option", { value: "json" }, "JSON"));
  const results = h("div", { id: "mb-results" });
  let next = null;
  async function load(from) {
    results.replaceChildren(h("p", { class: "muted" }, "loading…"));
    const q = new URLSearchParams({ partition: part.value, offset: from, limit: limit.value });
    if (key.value) q.set("key", key.value);
    try {
      const page = await api(`/api/v1/topics/${enc(d.name)}/messages?${q}`);
      next = page.next_offset < page.high_watermark ? String(page.next_offset) : null;
      results.replaceChildren(renderPage(page, decode.value), h("div", { class: "toolbar" },
        h("span", { class: "muted" }, `offsets ${page.log_start_offset}–${page.high_watermark} · read ${page.scanned} from ${page.start_offset}`),
        next ? h("button", { class: "secondary", id: "mb-next", onclick: () => load(next) }, "Next page") : null));
    } catch (e) {
      results.replaceChildren(errorBox(e));
    }
  }
  const go = h("button", { id: "mb-go", onclick: () => {
    let from = offset.value.trim() || "start";
    if (time.value) from = "@" + new Date(time.value).getTime();
    load(from);
  } }, "Show");
  root.append(h("div", { class: "toolbar" },
    h("label", {}, "Partition", part), h("label", {}, "From", offset), h("label", {}, "or time", time),
    h("label", {}, "Key", key), h("label", {}, "Limit", limit), h("label", {}, "Value as", decode), go), results);
  load("start");
}

function shown(v, mode) {
  if (v === null || v === undefined) return h("span", { class: "muted" }, "null");
  if (mode === "json") {
    try { return h("pre", {}, JSON.stringify(JSON.parse(v), null, 2)); } catch (_) { /* not JSON */ }
  }
  return h("pre", {}, v);
}

// A key or value in the schema registry's wire format is shown as the JSON its schema reads
// (decoded by the broker, `value_schema`), whatever the mode: as text it is binary noise.
function viaSchema(raw, decoded, mode) {
  if (!decoded) return shown(raw, mode);
  const pill = h("span", { class: decoded.error ? "pill warn" : "pill", "data-test": "schema" },
    `${decoded.schema_type || "unknown schema"} · id ${decoded.schema_id}`);
  if (decoded.error) return h("div", {}, pill, h("div", { class: "muted", "data-test": "schema-error" }, decoded.error));
  return h("div", {}, pill, h("pre", { "data-test": "schema-json" }, JSON.stringify(decoded.json, null, 2)));
}

function renderPage(page, mode) {
  if (!page.messages.length) return h("p", { class: "muted", "data-test": "no-messages" }, "No records here.");
  return table(["Offset", "Timestamp", "Key", "Value", "Headers"], page.messages.map((m) => h("tr", { "data-offset": m.offset },
    tdn(m.offset), td(new Date(m.timestamp).toISOString()), td(viaSchema(m.key, m.key_schema, "text")),
    td(viaSchema(m.value, m.value_schema, mode), m.truncated ? "truncated" : null),
    td(m.headers.map((x) => h("div", {}, `${x.key}=${x.value === null ? "null" : x.value}`))))), { "data-test": "messages" });
}

async function groups() {
  const list = await api("/api/v1/groups");
  return [
    h("h1", {}, "Consumer groups"),
    list.length ? table(["Group", "State", "Type", "Coordinator"], list.map((g) => h("tr", { "data-group": g.group },
      td(h("a", { href: `#/groups/${enc(g.group)}` }, g.group)), td(h("span", { class: "pill" }, g.state)), td(g.type), td(g.coordinator))))
      : h("p", { class: "muted" }, "No consumer groups."),
  ];
}

function lagChart(parts) {
  const rows = parts.filter((p) => p.lag !== null);
  const w = 560, bar = 18, gap = 6, left = 150;
  const max = Math.max(1, ...rows.map((p) => p.lag));
  const svgNS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNS, "svg");
  svg.setAttribute("class", "bars");
  svg.setAttribute("width", w);
  svg.setAttribute("height", Math.max(bar, rows.length * (bar + gap)));
  svg.dataset.test = "lag-chart";
  rows.forEach((p, i) => {
    const y = i * (bar + gap);
    const label = document.createElementNS(svgNS, "text");
    label.setAttribute("x", 0); label.setAttribute("y", y + 13);
    label.textContent = `${p.topic}/${p.partition}`;
    const r = document.createElementNS(svgNS, "rect");
    r.setAttribute("x", left); r.setAttribute("y", y);
    r.setAttribute("height", bar); r.setAttribute("width", Math.max(1, ((w - left - 60) * p.lag) / max));
    const v = document.createElementNS(svgNS, "text");
    v.setAttribute("x", left + Math.max(1, ((w - left - 60) * p.lag) / max) + 6); v.setAttribute("y", y + 13);
    v.textContent = num(p.lag);
    svg.append(label, r, v);
  });
  return svg;
}

async function groupPage(id) {
  const [d, who] = await Promise.all([api(`/api/v1/groups/${enc(id)}`), api(`/api/v1/session?group=${enc(id)}`)]);
  const topicsIn = [...new Set(d.partitions.map((p) => p.topic))];
  const to = h("input", { id: "seek-to", value: "start", size: 14, title: "start, end, an offset, or @timestamp-ms" });
  const topicSel = h("select", { id: "seek-topic" }, h("option", { value: "" }, "all committed topics"), topicsIn.map((t) => h("option", { value: t }, t)));
  const result = h("div", { id: "seek-result" });
  const seek = async () => {
    const target = to.value.trim();
    const scope = topicSel.value ? `topic ${topicSel.value}` : "every topic it has offsets for";
    if (!(await confirmDialog(`Reset the offsets of group ${d.group} to ${target} on ${scope}?`))) return;
    try {
      const r = await api(`/api/v1/groups/${enc(id)}/seek`, {
        method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ to: target, topics: topicSel.value ? [topicSel.value] : [] }),
      });
      const failed = r.partitions.filter((p) => p.error);
      result.replaceChildren(failed.length ? errorBox(new Error(`${failed.length} partition(s) failed: ${failed[0].error.name}`))
        : h("div", { class: "notice", "data-test": "seek-ok" }, `Offsets reset on ${r.partitions.length} partition(s).`));
      setTimeout(route, 600);
    } catch (e) {
      result.replaceChildren(errorBox(e));
    }
  };
  return [
    h("h1", {}, "Group ", h("span", { "data-test": "group-name" }, d.group)),
    h("div", { class: "cards" },
      h("div", { class: "card" }, h("div", { class: "label" }, "State"), h("div", { class: "value", "data-test": "group-state" }, d.state)),
      h("div", { class: "card" }, h("div", { class: "label" }, "Members"), h("div", { class: "value" }, d.members.length)),
      h("div", { class: "card" }, h("div", { class: "label" }, "Total lag"), h("div", { class: "value", "data-test": "total-lag" }, num(d.total_lag))),
      h("div", { class: "card" }, h("div", { class: "label" }, "Protocol"), h("div", { class: "value" }, d.protocol || "–"))),
    h("h2", {}, "Lag per partition"),
    d.partitions.length ? lagChart(d.partitions) : h("p", { class: "muted" }, "No offsets committed."),
    table(["Topic", "Partition", "Committed offset", "Log end offset", "Lag", "Member", "Client", "Host"], d.partitions.map((p) => h("tr", { "data-partition": `${p.topic}/${p.partition}` },
      td(p.topic), tdn(p.partition), tdn(p.committed_offset), tdn(p.log_end_offset), h("td", { class: "num", "data-test": "lag" }, num(p.lag)), td(p.member_id), td(p.client_id), td(p.host))), { "data-test": "group-partitions" }),
    h("h2", {}, "Members"),
    d.members.length ? table(["Member", "Instance", "Client", "Host", "Assignment"], d.members.map((m) => h("tr", {},
      td(m.member_id), td(m.instance_id), td(m.client_id), td(m.host), td(m.assignments.map((a) => `${a.topic}: ${a.partitions.join(",")}`).join("; ")))))
      : h("p", { class: "muted" }, "No active members: offsets can be reset."),
    h("h2", {}, "Reset offsets"),
    h("div", { class: "toolbar" }, h("label", {}, "To", to), h("label", {}, "Topic", topicSel),
      h("button", { id: "seek-go", class: "danger", disabled: d.members.length > 0 || !who.may_write, onclick: seek }, "Reset offsets…")),
    d.members.length ? h("p", { class: "muted" }, "Stop the group's consumers first: Kafka refuses commits from outside an active group.") : null,
    who.may_write ? null : h("p", { class: "muted", "data-test": "read-only" }, `Read-only as ${who.principal}: the broker checks ACLs; sign in with a SCRAM user to reset offsets. `, h("a", { href: "/login", "data-test": "sign-in" }, "Sign in")),
    result,
  ];
}

async function connectors() {
  const d = await api("/api/v1/connectors");
  if (!d.running) {
    return [h("h1", {}, "Connectors"), h("p", { class: "muted", "data-test": "no-connectors" },
      "This broker runs no connectors. Add [[connectors]] to the serve config, or run `strom connect` and check it with `strom connect status`.")];
  }
  return [h("h1", {}, "Connectors"), table(["Connector", "Records written", "Batches", "DLQ records", "Errors", "Lag"], d.connectors.map((c) => h("tr", {},
    td(c.connector), tdn(c.records_written), tdn(c.batches_written), tdn(c.dlq_records), tdn(Object.values(c.errors).reduce((a, b) => a + b, 0)), tdn(c.lag))))];
}

async function health() {
  const [hl, ready] = await Promise.all([api("/api/v1/health"), fetch("/ready").then((r) => r.ok)]);
  const list = (ps) => (ps.length ? ps.map((p) => `${p.topic}/${p.partition}`).join(", ") : "none");
  return [
    h("h1", {}, "Cluster health"),
    h("p", {}, h("span", { class: hl.healthy ? "pill ok" : "pill bad", "data-test": "healthy" }, hl.healthy ? "healthy" : "unhealthy"), " ",
      h("span", { class: ready ? "pill ok" : "pill warn" }, ready ? "ready" : "recovering")),
    table(["Check", "Value"], [
      h("tr", {}, td("Controller"), td(hl.controller)),
      h("tr", {}, td("Brokers"), td(hl.brokers.join(", "))),
      h("tr", {}, td("Brokers down"), td(hl.brokers_down.join(", ") || "none")),
      h("tr", {}, td("Leaderless partitions"), td(list(hl.leaderless_partitions))),
      h("tr", {}, td("Under-replicated partitions"), td(list(hl.under_replicated_partitions))),
    ]),
  ];
}

function confirmDialog(text) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.showModal();
  });
}

// ------------------------------------------------------------------ routing

async function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const page = parts[0] || "overview";
  document.querySelectorAll("header nav a").forEach((a) => a.classList.toggle("active", a.dataset.nav === page));
  let view;
  if (page === "topics" && parts[1]) view = () => topicPage(parts[1]);
  else if (page === "groups" && parts[1]) view = () => groupPage(parts[1]);
  else view = { overview, topics, groups, connectors, health }[page] || overview;
  app.dataset.page = page;
  app.dataset.loaded = "false";
  try {
    app.replaceChildren(...(await view()).filter((x) => x !== null && x !== undefined));
  } catch (e) {
    app.replaceChildren(errorBox(e));
  }
  app.dataset.loaded = "true";
  document.getElementById("status").textContent = "updated " + new Date().toLocaleTimeString();
}

window.addEventListener("hashchange", route);
route();
sample();
setInterval(sample, 2000);
