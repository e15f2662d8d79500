// The console page: polls /console/cluster on the node that served it and draws it; sends the operator's
// commands to /console/cluster/COMMAND with the control token. No library: the DOM and inline SVG only.
// Everything from the crawl (hosts, reasons, errors) goes into the page as text, never as markup.
"use strict";

(() => {
  const POLL_MS = 2000;
  const TOKEN_KEY = "crawler-console-token";     // sessionStorage: kept for this tab only
  const SVG = "http://www.w3.org/2000/svg";
  const CLASSES = ["2xx", "3xx", "4xx", "5xx"];
  const $ = (id) => document.getElementById(id);

  let token = sessionStorage.getItem(TOKEN_KEY) || "";
  let timer = null;
  let busy = false;

  // --- formatting ---------------------------------------------------------------------------------
  const int = (n) => Number(n || 0).toLocaleString("en-US");
  const pct = (r) => (r === null || r === undefined ? "-" : (100 * r).toFixed(1) + "%");
  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    n = Number(n || 0);
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }

  function cell(text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  function fill(tbody, rows) {
    tbody.replaceChildren(...rows);
  }

  function row(cells, cls) {
    const tr = document.createElement("tr");
    if (cls) tr.className = cls;
    tr.append(...cells);
    return tr;
  }

  function problem(text) {
    const p = $("problem");
    p.textContent = text;
    p.hidden = !text;
  }

  // --- drawing ------------------------------------------------------------------------------------
  function nodeState(n) {
    if (!n.up) return "down: " + n.reason;
    if (n.console_error) return "? " + n.console_error;
    if (n.stop) return n.stop === "done" ? "done" : "stopping (" + n.stop + ")";
    return n.paused ? "paused" : "running";
  }

  function nodeCells(n, label) {
    const classes = n.status_classes || {};
    const hits = n.cache_hit_rates || {};
    return [cell(label), cell(n.id === undefined ? "" : nodeState(n)), cell(int(n.pages)),
      ...CLASSES.map((c) => cell(int(classes[c]))), cell(int(n.errors)), cell(int(n.frontier_urls)),
      cell(int(n.active_hosts)), cell(n.id === undefined ? "" : int(n.inflight)), cell(pct(hits.due)),
      cell(pct(hits.splitter))];
  }

  function drawNodes(view) {
    fill($("nodes").tBodies[0], view.nodes.map((n) => {
      const tr = row(nodeCells(n, String(n.id) + (n.id === view.here ? " (this page)" : "")),
        !n.up ? "down" : n.paused ? "paused" : "");
      tr.id = "node-" + n.id;
      return tr;
    }));
    fill($("nodes").tFoot, [row(nodeCells(view.total, "total (" + view.total.reason + ")"))]);
    $("blocked").textContent = view.blocked.length ? "Blocked: " + view.blocked.join(", ") : "";
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function drawChart(rate) {
    // From the first second with pages (at least the last MIN_SPAN_S): a young crawl fills the chart.
    const MIN_SPAN_S = 60;
    const first = rate.total.findIndex((v) => v > 0);
    const from = first < 0 ? 0 : Math.max(0, Math.min(first, rate.total.length - MIN_SPAN_S / rate.step_s));
    const cut = (values) => values.slice(from);
    rate = { ...rate, total: cut(rate.total),
      nodes: Object.fromEntries(Object.entries(rate.nodes).map(([id, s]) => [id, cut(s)])) };
    const chart = $("chart");
    const W = 960, H = 220, left = 44, bottom = 18, top = 8;
    const series = Object.entries(rate.nodes);
    const all = [rate.total, ...series.map(([, s]) => s)];
    const peak = Math.max(1, ...all.flat());
    const scale = Math.pow(10, Math.floor(Math.log10(peak)));
    const ymax = Math.ceil(peak / scale) * scale;
    const points = rate.total.length;
    const x = (i) => left + (W - left - 4) * (points > 1 ? i / (points - 1) : 0);
    const y = (v) => top + (H - top - bottom) * (1 - v / ymax);
    const parts = [];
    for (const f of [0, 0.5, 1]) {
      parts.push(svg("line", { class: "grid", x1: left, x2: W - 4, y1: y(f * ymax), y2: y(f * ymax) }));
      parts.push(svg("text", { class: "axis", x: left - 6, y: y(f * ymax) + 4, "text-anchor": "end" },
        String(Math.round(f * ymax * 10) / 10)));
    }
    const span = rate.total.length * rate.step_s;
    const ago = span >= 120 ? Math.round(span / 60) + " min" : span + " s";
    parts.push(svg("text", { class: "axis", x: left, y: H - 3 }, "-" + ago));
    parts.push(svg("text", { class: "axis", x: W - 4, y: H - 3, "text-anchor": "end" }, "now"));
    const line = (values, cls) => svg("polyline", {
      class: cls, points: values.map((v, i) => x(i).toFixed(1) + "," + y(v).toFixed(1)).join(" "),
    });
    for (const [id, values] of series) parts.push(line(values, "n" + (Number(id) % 8)));
    if (rate.total.length) parts.push(line(rate.total, "total"));
    chart.replaceChildren(...parts);
    const last = (values) => (values.length ? values[values.length - 1] : 0);
    const legend = [["total", "cluster " + last(rate.total).toFixed(1) + "/s"],
      ...series.map(([id, s]) => ["n" + (Number(id) % 8), "node " + id + " " + last(s).toFixed(1) + "/s"])];
    $("legend").replaceChildren(...legend.map(([cls, text]) => {
      const span = document.createElement("span");
      span.className = cls;
      span.textContent = text;
      return span;
    }));
  }

  function drawHosts(view) {
    fill($("busiest").tBodies[0], view.busiest.map((h) => row([cell(h.host, "text"), cell(String(h.node)),
      cell(int(h.pages)), cell(bytes(h.bytes)), cell(int(h.status_4xx)), cell(int(h.status_5xx))])));
    fill($("failing").tBodies[0], view.failing.map((h) => row([cell(h.host, "text"), cell(String(h.node)),
      cell(int(h.errors)), cell(int(h.status_5xx)), cell(int(h.pages)), cell(h.reason || "-", "text")])));
    const reasons = Object.entries(view.failures);
    const most = Math.max(1, ...reasons.map(([, n]) => n));
    fill($("failures").tBodies[0], reasons.map(([reason, n]) => {
      const bar = document.createElement("div");
      bar.className = "bar";
      bar.style.width = (100 * n / most).toFixed(1) + "%";
      const td = document.createElement("td");
      td.className = "text";
      td.append(bar);
      return row([cell(reason, "text"), cell(int(n)), td]);
    }));
  }

  function draw(view) {
    $("cluster").textContent = view.cluster;
    const state = $("state");
    state.textContent = view.state;
    state.className = "state " + view.state.replace(" ", "-");
    $("here").textContent = "served by node " + view.here;
    $("updated").textContent = "updated " + new Date(view.time * 1000).toLocaleTimeString();
    drawNodes(view);
    drawChart(view.rate);
    drawHosts(view);
  }

  async function refresh() {
    if (busy) return;
    busy = true;
    clearTimeout(timer);
    try {
      const resp = await fetch("/console/cluster", { cache: "no-store" });
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      draw(await resp.json());
      problem("");
    } catch (err) {
      problem("Cannot read the cluster view from this node: " + err.message);
    } finally {
      busy = false;
      timer = setTimeout(refresh, POLL_MS);
    }
  }

  // --- commands -----------------------------------------------------------------------------------
  function answer(text, failed) {
    const pre = $("answer");
    pre.textContent = text;
    pre.className = "answer" + (failed ? " failed" : "");
  }

  function showToken() {
    $("token-state").textContent = token ? "token set for this tab" : "no token: changes are refused";
  }

  async function send(command, body) {
    if (!token) {
      answer("Paste the control token first (crawler ctl -c FILE token prints it).", true);
      $("token").focus();
      return false;
    }
    answer(command + " ...", false);
    try {
      const resp = await fetch("/console/cluster/" + command, {
        method: "POST", cache: "no-store",
        headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
        body: JSON.stringify(body || {}),
      });
      const data = await resp.json();
      if (!resp.ok) {
        answer(command + ": refused: " + (data.error || "HTTP " + resp.status), true);
        return false;
      }
      const lines = data.nodes.map((a) => "node " + a.node + ": " + (a.ok
        ? "ok" + Object.entries(a.result).map(([k, v]) => ", " + k + " " + JSON.stringify(v)).join("")
        : "FAILED: " + a.error));
      const failed = data.nodes.some((a) => !a.ok);
      answer(command + "\n" + lines.join("\n"), failed);
      refresh();
      return !failed;
    } catch (err) {
      answer(command + ": " + err.message, true);
      return false;
    }
  }

  function hostPattern() {
    const host = $("block-host").value.trim();
    if (!host) answer("Type a host (example.org) or a domain (.example.org) first.", true);
    return host;
  }

  function start() {
    showToken();
    $("token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      token = $("token").value.trim();
      $("token").value = "";
      if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY);
      showToken();
    });
    $("pause").addEventListener("click", () => send("pause"));
    $("resume").addEventListener("click", () => send("resume"));
    $("block-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const host = hostPattern();
      if (host) send("block", { pattern: host });
    });
    $("unblock").addEventListener("click", () => {
      const host = hostPattern();
      if (host) send("unblock", { pattern: host });
    });
    $("seeds-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const urls = $("seeds").value.split("\n").map((s) => s.trim()).filter((s) => s && !s.startsWith("#"));
      if (!urls.length) { answer("Type one URL a line first.", true); return; }
      send("seeds", { urls }).then((ok) => { if (ok) $("seeds").value = ""; });
    });
    refresh();
  }

  start();
})();
