/* The SYNAPSE memory explorer (docs/explorer.md): plain DOM code over the REST API, with
 * the key the user typed (sessionStorage of this tab). In a report written by
 * `synapse inspect --html`, the same views read the data embedded in the page instead. */
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const KEY = "synapse-explorer-key";
  const KNOWN = new Set(["similarity", "activation", "pagerank", "bm25_rank", "dense_rank", "lexical",
    "distinct", "weights"]);
  const embedded = $("report-data");
  const report = embedded ? JSON.parse(embedded.textContent) : null;
  const ui = { namespaces: 0, timelineRows: 0, hits: 0, bars: 0, graphNodes: 0, graphEdges: 0,
    lastError: null, ready: false, busy: 0, report: !!report, cy: null,
    readyAt: null, asks: 0, askMs: null };  // readyAt, askMs: the page's clock (bench/ui.py)
  window.synapseUI = ui;
  const state = { ns: null, offset: 0, limit: 50, memory: null };

  // -- helpers ---------------------------------------------------------------------------
  function el(tag, attrs, ...kids) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (v !== null && v !== undefined) node.setAttribute(k, v);
    }
    for (const kid of kids.flat()) {
      if (kid !== null && kid !== undefined) node.append(kid instanceof Node ? kid : String(kid));
    }
    return node;
  }
  const clear = (node) => { node.replaceChildren(); return node; };
  const when = (epoch) => (epoch === null || epoch === undefined) ? "" :
    new Date(epoch * 1000).toISOString().replace("T", " ").slice(0, 16);
  const iso = (text) => text ? text.replace("T", " ").slice(0, 16) : "";
  const bytes = (n) => n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` :
    `${(n / 1048576).toFixed(1)} MiB`;
  function status(text, isError) {
    $("status").textContent = text || "";
    $("status").className = isError ? "error" : "";
    if (isError) ui.lastError = text;
  }
  function showResult(title, lines, isError) {
    const box = clear($("result"));
    box.hidden = false;
    box.className = isError ? "error" : "";
    box.append(el("h3", {}, title), el("ul", {}, lines.map((l) => el("li", {}, l))));
  }

  async function api(method, path, body) {
    const headers = { "Accept": "application/json" };
    const key = sessionStorage.getItem(KEY);
    if (key) headers["X-API-Key"] = key;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    ui.busy++;
    try {
      const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const data = await res.json().catch(() => ({}));
      if (!res.ok) {
        const msg = (data.error && data.error.message) || `HTTP ${res.status}`;
        throw new Error(res.status === 401 ? `the key was refused: ${msg}` : msg);
      }
      return data;
    } finally { ui.busy--; }
  }
  const nsPath = (tail) => `/v1/namespaces/${encodeURIComponent(state.ns)}${tail}`;
  const idPath = (id, tail) => nsPath(`/memories/${encodeURIComponent(id)}${tail || ""}`);

  // -- namespaces -----------------------------------------------------------------------
  async function loadNamespaces() {
    const body = $("ns-table").tBodies[0];
    clear(body);
    $("namespace").hidden = true;
    let rows;
    try {
      rows = report ? [report.overview] : await Promise.all(
        (await api("GET", "/v1/namespaces")).namespaces.map((ns) =>
          api("GET", `/v1/namespaces/${encodeURIComponent(ns)}/overview`)));
      status(report ? `report written ${report.generated}` : "");
    } catch (err) {
      status(err.message, true);
      rows = [];
    }
    for (const o of rows) {
      body.append(el("tr", { "data-ns": o.namespace, onclick: () => openNamespace(o.namespace) },
        el("td", {}, el("a", { class: "id" }, o.namespace)), el("td", { class: "num" }, o.episodes),
        el("td", { class: "num" }, o.facts), el("td", { class: "num" }, o.concepts),
        el("td", { class: "num" }, o.archived), el("td", {}, when(o.last_write)),
        el("td", { class: "num" }, bytes(o.size_bytes))));
    }
    ui.namespaces = rows.length;
    $("ns-empty").hidden = rows.length > 0;
    ui.readyAt = performance.now();
    ui.ready = true;
    if (report) openNamespace(report.namespace);
  }

  function openNamespace(ns) {
    state.ns = ns;
    state.offset = 0;
    $("ns-title").textContent = ns;
    $("namespace").hidden = false;
    $("memory").hidden = true;
    loadTimeline();
  }

  // -- timeline -------------------------------------------------------------------------
  function filters() {
    const q = new URLSearchParams({ kind: $("f-kind").value, offset: state.offset, limit: state.limit });
    for (const [name, id] of [["speaker", "f-speaker"], ["since", "f-since"], ["until", "f-until"], ["where", "f-where"]]) {
      const v = $(id).value.trim();
      if (v) q.set(name, v);
    }
    return q;
  }
  async function loadTimeline() {
    let page;
    try {
      page = report ? report.timeline : await api("GET", nsPath(`/timeline?${filters()}`));
    } catch (err) { status(err.message, true); return; }
    const body = clear($("timeline").tBodies[0]);
    page.items.forEach((r, i) => {
      const text = r.kind === "fact" ? `${r.text} (from ${r.sources.length} turn${r.sources.length === 1 ? "" : "s"})` : r.text;
      body.append(el("tr", { "data-id": r.id, onclick: () => openMemory(r.id) },
        el("td", { class: "num" }, page.offset + i + 1), el("td", {}, when(r.ts)),
        el("td", {}, r.speaker || ""), el("td", {}, text, r.archived ? el("span", { class: "muted" }, " (archived)") : null)));
    });
    ui.timelineRows = page.items.length;
    const last = page.offset + page.items.length;
    $("page").textContent = `${page.items.length ? page.offset + 1 : 0}-${last} of ${page.total}` + (report ? " (as written in the report)" : "");
    $("prev").disabled = report || page.offset === 0;
    $("next").disabled = report || page.next_offset === null;
  }

  // -- one memory: versions, provenance, place in the graph, fix ------------------------
  async function openMemory(id) {
    let info, versions;
    try {
      if (report) {
        const m = report.memories[id];
        if (!m) { status(`${id} is not detailed in this report (only the hits of its query are)`, true); return; }
        info = m.inspect; versions = m.history;
      } else {
        [info, versions] = await Promise.all([api("GET", idPath(id, "/inspect")),
          api("GET", idPath(id, "/history")).then((h) => h.versions)]);
      }
    } catch (err) { status(err.message, true); return; }
    state.memory = info.memory;
    const m = info.memory;
    $("memory").hidden = false;
    $("m-id").textContent = m.id;
    $("m-text").textContent = m.text;
    const attrs = clear($("m-attrs"));
    const shown = { kind: m.ctype === "Fact" ? "fact" : m.kind, speaker: m.speaker, time: when(m.ts),
      metadata: m.metadata && Object.keys(m.metadata).length ? JSON.stringify(m.metadata) : null,
      archived: info.archived ? "yes" : null };
    for (const [k, v] of Object.entries(shown)) if (v) attrs.append(el("dt", {}, k), el("dd", {}, v));
    clear($("m-versions")).append(...versions.map((v) => el("li", { class: v.valid_until === null ? "current" : "" },
      `${when(v.valid_from) || "?"} .. ${v.valid_until === null ? "now" : when(v.valid_until)}: `, v.text,
      " ", memoryLink(v.id))));
    const prov = clear($("m-provenance"));
    const sources = Object.values(m.sources || {}).flatMap((s) => s.exact || []);
    if (sources.length) [...new Set(sources)].forEach((s) => prov.append(el("li", {}, "came from turn ", memoryLink(s))));
    else if (m.kind === "episode") {
      const derived = info.links.filter((l) => l.kind === "concept");
      if (derived.length) derived.forEach((l) => prov.append(el("li", {}, `led to ${l.text} `, memoryLink(l.id))));
      else prov.append(el("li", { class: "muted" }, "a stored turn; nothing was derived from it yet"));
    } else prov.append(el("li", { class: "muted" }, "no recorded source"));
    clear($("m-links")).append(...info.links.slice(0, 20).map((l) => el("li", {},
      `${l.edge} (${l.weight.toFixed(2)}) -> ${l.kind}: ${String(l.text).slice(0, 80)} `, memoryLink(l.id))));
    $("fix").hidden = !!report || m.kind !== "episode";
    $("m-new-text").value = m.text || "";
  }
  function memoryLink(id) {
    return el("a", { class: "id", onclick: (e) => { e.stopPropagation(); openMemory(id); } }, `[${id.slice(0, 14)}]`);
  }

  async function updateMemory() {
    const m = state.memory;
    const text = $("m-new-text").value.trim();
    if (!m || !text || text === m.text) return;
    try {
      const out = await api("POST", nsPath("/update"), { id: m.id, text });
      showResult("Updated", [`new version ${out.id} now holds: ${text}`, `${m.id} is kept as the version it replaced`]);
      await openMemory(out.id);
      loadTimeline();
    } catch (err) { showResult("Update failed", [err.message], true); }
  }

  async function askForget() {
    const m = state.memory;
    if (!m) return;
    let preview;
    try { preview = await api("POST", nsPath("/forget/preview"), { ids: [m.id] }); }
    catch (err) { showResult("Forget failed", [err.message], true); return; }
    const list = clear($("confirm-list"));
    const line = (r, what) => el("li", { "data-id": r.id }, `${what}: ${r.text} `,
      el("code", {}, r.id));
    preview.memories.forEach((r) => list.append(line(r, r.kind)));
    preview.derived.forEach((r) => list.append(line(r, `${r.kind} derived only from it`)));
    $("confirm").showModal();
  }
  async function doForget() {
    $("confirm").close();
    const m = state.memory;
    try {
      const out = await api("POST", nsPath("/forget"), { ids: [m.id] });
      showResult("Forgotten", [out.message, ...out.removed.map((i) => `removed ${i}`)]);
      $("memory").hidden = true;
      state.memory = null;
      loadTimeline();
    } catch (err) { showResult("Forget failed", [err.message], true); }
  }

  // -- ask: ranked hits, score bars, gate, activation graph -----------------------------
  function terms(c) {
    const out = [];
    for (const [name, w] of Object.entries(c.weights || {})) out.push([name, w * (c[name] || 0), `${(c[name] || 0).toFixed(3)} x ${w}`]);
    for (const [name, v] of Object.entries(c)) {
      if (!KNOWN.has(name) && typeof v === "number" && v !== 0) out.push([name, v, "signal adjustment"]);
    }
    return out;
  }
  function bars(item, scale) {
    const box = el("div", { class: "bars" });
    for (const [name, v, how] of terms(item.components)) {
      const span = el("span", { class: v < 0 ? "neg" : "", style: `width:${Math.min(100, 100 * Math.abs(v) / scale).toFixed(1)}%` });
      box.append(el("span", { title: how }, name), el("div", { class: "bar", "data-term": name, title: how }, span),
        el("span", { class: "num" }, v.toFixed(3)));
      ui.bars++;
    }
    return box;
  }
  async function ask(event) {
    if (event) event.preventDefault();
    const query = $("query").value.trim();
    if (!query) return;
    const kinds = $("with-concepts").checked ? ["episode", "concept"] : ["episode"];
    let out;
    const t0 = performance.now();
    try {
      out = report ? report.ask : await api("POST", nsPath("/explain"), { query, k: Number($("k").value) || 10, kinds });
    } catch (err) { status(err.message, true); return; }
    renderAsk(out);
    ui.askMs = performance.now() - t0;
    ui.asks++;
  }
  function renderAsk(out) {
    const gate = $("gate");
    gate.className = out.gate.decision;
    gate.textContent = `Gate: ${out.gate.decision}. ${out.gate.reason}`;
    const hits = clear($("hits"));
    ui.bars = 0;
    const scale = Math.max(1e-9, ...out.items.flatMap((it) => terms(it.components).map((t) => Math.abs(t[1]))));
    for (const it of out.items) {
      const when_ = it.timestamp ? `[${iso(it.timestamp)}] ` : "";
      hits.append(el("li", { "data-id": it.id, onclick: () => openMemory(it.id) },
        el("div", { class: "text" }, when_, it.speaker ? `${it.speaker}: ` : "", it.text),
        el("div", { class: "muted" }, `score ${it.score.toFixed(3)}`, it.concepts.length ? ` · via ${it.concepts.join(", ")}` : "",
          it.superseded_by ? " · replaced" : ""), bars(it, scale)));
    }
    ui.hits = out.items.length;
    drawGraph(out.graph);
  }
  function drawGraph(graph) {
    if (ui.cy) ui.cy.destroy();
    const top = Math.max(1e-9, ...graph.nodes.map((n) => n.activation));
    const elements = graph.nodes.map((n) => ({ data: { ...n, label: n.rank ? `${n.rank}. ${n.label}` : n.label,
      size: 14 + 36 * Math.sqrt(n.activation / top) } }))
      .concat(graph.edges.map((e) => ({ data: { id: `${e.source}->${e.target}`, ...e } })));
    ui.cy = cytoscape({
      container: $("graph"), elements, wheelSensitivity: 0.3,
      layout: { name: "cose", animate: false, randomize: false, nodeRepulsion: 9000, idealEdgeLength: 70 },
      style: [
        { selector: "node", style: { width: "data(size)", height: "data(size)", label: "data(label)", "font-size": 9,
          "text-wrap": "ellipsis", "text-max-width": 120, "background-color": "#457b9d" } },
        { selector: "node[kind = 'concept']", style: { "background-color": "#e9c46a" } },
        { selector: "node[kind = 'fact']", style: { "background-color": "#2a9d8f" } },
        { selector: "node[?anchor]", style: { "border-width": 3, "border-color": "#d62828" } },
        { selector: "node[role = 'hit']", style: { "font-weight": "bold" } },
        { selector: "edge", style: { width: 1.5, "curve-style": "bezier", "target-arrow-shape": "triangle",
          "line-color": "#9aa5b1", "target-arrow-color": "#9aa5b1" } },
        { selector: "edge[why = 'concept']", style: { "line-style": "dashed" } },
      ],
    });
    ui.cy.on("tap", "node", (e) => openMemory(e.target.id()));
    ui.graphNodes = ui.cy.nodes().length;
    ui.graphEdges = ui.cy.edges().length;
  }

  // -- wiring ---------------------------------------------------------------------------
  document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => {
    document.querySelectorAll("#tabs button").forEach((x) => x.classList.toggle("on", x === b));
    $("tab-timeline").hidden = b.dataset.tab !== "timeline";
    $("tab-ask").hidden = b.dataset.tab !== "ask";
    if (ui.cy) ui.cy.resize();
  }));
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY, $("key").value);
    $("key").value = "";
    loadNamespaces();
  });
  $("drop-key").addEventListener("click", () => { sessionStorage.removeItem(KEY); loadNamespaces(); });
  $("filters").addEventListener("submit", (e) => { e.preventDefault(); state.offset = 0; loadTimeline(); });
  $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); loadTimeline(); });
  $("next").addEventListener("click", () => { state.offset += state.limit; loadTimeline(); });
  $("ask-form").addEventListener("submit", ask);
  $("m-close").addEventListener("click", () => { $("memory").hidden = true; });
  $("m-update").addEventListener("click", updateMemory);
  $("m-forget").addEventListener("click", askForget);
  $("confirm-yes").addEventListener("click", doForget);
  $("confirm-no").addEventListener("click", () => $("confirm").close());
  if (report) {
    $("key-form").hidden = true;
    $("filters").hidden = true;
    if (report.ask) {
      $("query").value = report.ask.query;
      $("ask-form").querySelectorAll("input, button").forEach((x) => { x.disabled = true; });
    }
  }
  loadNamespaces().then(() => {
    if (report && report.ask) { $("tabs").querySelector("[data-tab=ask]").click(); renderAsk(report.ask); }
  });
})();
