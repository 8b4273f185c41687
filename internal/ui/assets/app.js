// Shoal's dashboard: plain JavaScript, no framework, no build step. Every
// figure on the page comes from the node's API, asked with the admin token
// the user pastes (kept in sessionStorage, sent as Authorization: Bearer):
//
//   GET /v1/cluster?all=1&partitions=1&moves=all   every second: members,
//                                  peer list, voters, partition counts,
//                                  replication, the moves from every member,
//                                  and every partition's master, epoch,
//                                  preferred master, responsible list and
//                                  position here (partition_table): the ring
//   GET /v1/admin/rollback         every five seconds: rollbacks
//   GET /v1/users/{u}/collections and .../documents: the document browser
"use strict";

(function () {
  const TOKEN_KEY = "shoal.adminToken";
  const POLL_MS = 1000;
  const TIMEOUT_MS = 3000;
  const ROLLBACK_EVERY_MS = 5000;
  const ROLLBACK_LIMIT = 100;
  const LAG_WINDOW_MS = 5 * 60 * 1000;
  // The API is beside /ui/: "../v1/..." from the page.
  const BASE = new URL("../", document.baseURI);
  const PALETTE = ["#2456c5", "#e07b00", "#17803d", "#b0306e", "#7b4bc4", "#0f8c8c", "#9a6b12", "#c0262d", "#4c6a1c", "#566070"];
  const NO_MASTER = "#d0d4da";
  const UNKNOWN = "#f0f2f5";
  const SVG = "http://www.w3.org/2000/svg";

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || "",
    authProblem: "", // why the node refused the token ("" : it did not)
    downSince: null, // the first unanswered poll of the current run of them
    error: "", // an answer other than 200 from GET /v1/cluster
    cluster: null, // the last answer of GET /v1/cluster
    answeredAt: null,
    colours: new Map(), // node id -> colour, kept for the page's life
    partitions: [], // partition -> its row of partition_table, as of answeredAt
    ringError: "",
    selected: null,
    moves: new Map(), // partition -> {move, firstSeen, maxPct}: listed now
    movesDone: [], // moves no longer listed, newest first
    lag: [], // {t, per: {replica: summary}}, the last LAG_WINDOW_MS
    lagMetric: "lagMs", // what the chart draws: lagMs or behind
    rollbacks: null,
    rollbacksAt: 0,
    doc: { user: "", coll: "", cursors: [""], page: 0, next: "" },
  };

  // ---- helpers -------------------------------------------------------

  function $(id) { return document.getElementById(id); }

  function el(tag, attrs, ...children) {
    const svg = ["svg", "path", "polyline", "line", "text", "title", "g", "circle"].includes(tag);
    const e = svg ? document.createElementNS(SVG, tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.setAttribute("class", v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function clock(d) {
    const p = (n) => String(n).padStart(2, "0");
    return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  }

  function bytes(n) {
    if (n === undefined || n === null) return "-";
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    let v = n;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
  }

  function pos(p) { return p ? `${p.epoch}/${p.seq}` : "-"; }

  // naturalLess orders node ids as a person expects (node2 before node10).
  function naturalCompare(a, b) {
    return a.localeCompare(b, undefined, { numeric: true });
  }

  // sleep waits ms, or less when a new token is given (wakeAll).
  function sleep(ms) {
    return new Promise((resolve) => {
      const wake = () => { clearTimeout(t); wakers.delete(wake); resolve(); };
      const t = setTimeout(wake, ms);
      wakers.add(wake);
    });
  }
  const wakers = new Set();
  function wakeAll() { for (const w of [...wakers]) w(); }

  function colourOf(id) {
    if (!id) return NO_MASTER;
    if (!state.colours.has(id)) state.colours.set(id, PALETTE[state.colours.size % PALETTE.length]);
    return state.colours.get(id);
  }

  // ---- talking to the node -------------------------------------------

  class Unanswered extends Error {}

  // call asks the node; it resolves to {status, body} for any answer and
  // rejects with Unanswered when none came within TIMEOUT_MS.
  async function call(path) {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), TIMEOUT_MS);
    try {
      let resp;
      try {
        resp = await fetch(new URL(path, BASE), {
          headers: state.token
            ? { Authorization: `Bearer ${state.token}`, Accept: "application/json" }
            : { Accept: "application/json" },
          cache: "no-store",
          signal: ctrl.signal,
        });
      } catch (e) {
        throw new Unanswered(String(e));
      }
      const text = await resp.text();
      let body = null;
      try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
      if (resp.status === 401 || resp.status === 403) refused(resp.status, body);
      return { status: resp.status, body };
    } finally {
      clearTimeout(timer);
    }
  }

  function problemText(r) {
    const b = r.body || {};
    return `${r.status}${b.title ? " " + b.title : ""}${b.detail ? ": " + b.detail : ""}`;
  }

  function refused(status, body) {
    const detail = body && body.detail ? ` (${body.detail})` : "";
    state.authProblem = status === 401
      ? `The node refused the token: 401${detail}. Paste an admin token (shoal token --admin).`
      : `This token is not an admin token: 403${detail}. Paste an admin token (shoal token --admin).`;
    renderBanners();
  }

  function usable() { return state.token !== "" && state.authProblem === ""; }

  // ---- the loops -----------------------------------------------------

  async function clusterLoop() {
    for (;;) {
      const started = Date.now();
      try {
        if (usable()) await pollCluster();
      } catch (e) {
        state.error = `the dashboard failed: ${e}`;
        renderBanners();
      }
      await sleep(Math.max(100, POLL_MS - (Date.now() - started)));
    }
  }

  async function pollCluster() {
    let r;
    try {
      r = await call("v1/cluster?all=1&partitions=1&moves=all");
    } catch (e) {
      if (!(e instanceof Unanswered)) throw e;
      if (!state.downSince) state.downSince = new Date();
      renderBanners();
      return;
    }
    state.downSince = null;
    if (r.status !== 200) {
      if (r.status !== 401 && r.status !== 403) state.error = `GET /v1/cluster answered ${problemText(r)}`;
      renderBanners();
      return;
    }
    state.error = "";
    state.cluster = r.body;
    state.answeredAt = new Date();
    takeTable(r.body);
    trackMoves(r.body);
    recordLag(r.body);
    render();
    if (Date.now() - state.rollbacksAt >= ROLLBACK_EVERY_MS) {
      state.rollbacksAt = Date.now();
      pollRollbacks().catch((e) => {
        state.rollbacks = { error: `the dashboard failed: ${e}` };
        renderRollbacks();
      });
    }
  }

  async function pollRollbacks() {
    try {
      const r = await call(`v1/admin/rollback?limit=${ROLLBACK_LIMIT}`);
      state.rollbacks = r.status === 200 ? r.body : { error: problemText(r) };
    } catch (e) {
      if (!(e instanceof Unanswered)) throw e;
      return; // the cluster poll says the node is not answering
    }
    renderRollbacks();
  }

  // ---- what the page remembers ---------------------------------------

  // takeTable keeps the answer's partition table: one row per partition,
  // as the node sees it (the same view as GET /v1/users/{user}/placement).
  function takeTable(c) {
    const table = c.partition_table;
    const count = c.partitions ? c.partitions.count : 0;
    if (!Array.isArray(table)) {
      state.partitions = [];
      state.ringError = count > 0 ? "GET /v1/cluster?partitions=1 gave no partition_table: is the node older than this page?" : "";
      return;
    }
    const bad = table.findIndex((row, i) => !row || row.partition !== i);
    if (bad >= 0 || (count > 0 && table.length !== count)) {
      state.partitions = [];
      state.ringError = bad >= 0
        ? `row ${bad} of partition_table is not partition ${bad}`
        : `partition_table has ${table.length} rows for ${count} partitions`;
      return;
    }
    state.partitions = table;
    state.ringError = "";
  }

  // copyPercent is how much of a move's copy is done: documents copied of
  // the total while copying (null when the total is not counted yet), and
  // all of it once the move is past copying.
  function copyPercent(m) {
    if (m.phase !== "copying") return 100;
    if (!m.documents_total) return null;
    return Math.min(100, Math.floor((m.documents_copied * 100) / m.documents_total));
  }

  function trackMoves(c) {
    const now = new Date();
    const listed = new Map((c.moves || []).map((m) => [m.partition, m]));
    for (const [p, seen] of state.moves) {
      if (!listed.has(p)) {
        state.movesDone.unshift({ move: seen.move, firstSeen: seen.firstSeen, gone: now, maxPct: seen.maxPct });
        state.moves.delete(p);
      }
    }
    for (const [p, m] of listed) {
      const seen = state.moves.get(p) || { firstSeen: now, maxPct: null };
      seen.move = m;
      const pct = copyPercent(m);
      if (pct !== null) seen.maxPct = Math.max(seen.maxPct === null ? 0 : seen.maxPct, pct);
      state.moves.set(p, seen);
    }
    state.movesDone.length = Math.min(state.movesDone.length, 50);
  }

  function recordLag(c) {
    const per = {};
    for (const l of c.replication || []) {
      const r = per[l.replica] || (per[l.replica] = { partitions: 0, behind: 0, lagMs: 0, catchingUp: 0, copying: 0, copied: 0, toCopy: 0 });
      r.partitions++;
      r.behind += l.behind || 0;
      r.lagMs = Math.max(r.lagMs, l.lag_ms || 0);
      if (l.catching_up) r.catchingUp++;
      if (l.copying) { r.copying++; r.copied += l.copied || 0; r.toCopy += l.to_copy || 0; }
    }
    const now = Date.now();
    state.lag.push({ t: now, per });
    while (state.lag.length > 0 && state.lag[0].t < now - LAG_WINDOW_MS) state.lag.shift();
  }

  // ---- rendering -----------------------------------------------------

  function render() {
    renderBanners();
    renderHeader();
    renderMembers();
    renderRing();
    renderMoves();
    renderLag();
  }

  function renderBanners() {
    const down = $("banner-down");
    down.hidden = !state.downSince;
    down.textContent = state.downSince
      ? `node not answering since ${clock(state.downSince)}` + (state.answeredAt ? ` (last answer at ${clock(state.answeredAt)}; what follows is as of then)` : "")
      : "";
    document.body.classList.toggle("stale", !!state.downSince);
    const auth = $("banner-auth");
    const authText = state.token === "" ? "Paste an admin token (shoal token --admin) to see the cluster." : state.authProblem;
    auth.hidden = authText === "";
    auth.textContent = authText;
    const err = $("banner-error");
    err.hidden = state.error === "";
    err.textContent = state.error;
  }

  function renderHeader() {
    const c = state.cluster;
    if (!c) return;
    $("node-name").textContent = `${c.node}${c.version ? " · " + c.version : ""}`;
    document.title = `Shoal · ${c.node}`;
    $("updated").textContent = `as of ${clock(state.answeredAt)}`;
  }

  function roles(m) {
    if (!m.sharding && !m.replica && !m.voter) return "-";
    return `${m.sharding ? "S" : "-"} ${m.replica ? "R" : "-"} ${m.voter ? "V" : "-"}`;
  }

  function renderMembers() {
    const c = state.cluster;
    const ps = c.partitions || { masters: {}, copies: {} };
    const rows = (c.members || []).map((m) => {
      const masters = (ps.masters || {})[m.id] || 0;
      const copies = (ps.copies || {})[m.id] || 0;
      let note = "";
      if (!m.in_peer_list) note = masters + copies > 0 ? " (draining)" : " (out of the peer list, holds nothing)";
      const url = m.public_url || m.url || "";
      const heard = m.last_heard_ms_ago !== undefined && m.last_heard_ms_ago !== null ? `${(m.last_heard_ms_ago / 1000).toFixed(1)}s ago` : "-";
      return el("tr", { "data-testid": `member-${m.id}`, "data-state": m.state },
        el("td", {}, el("span", { class: "swatch", "data-colour": colourOf(m.id) }), (m.self ? "* " : "") + m.id + note),
        el("td", {}, el("span", { class: `state state-${m.state}`, "data-testid": `member-${m.id}-state` }, m.state)),
        el("td", {}, roles(m)),
        el("td", {}, url || "-"),
        el("td", { class: "num" }, bytes(m.free_bytes)),
        el("td", { class: "num", title: m.last_heard || "" }, heard),
        el("td", { class: "num" }, masters),
        el("td", { class: "num" }, copies),
        el("td", {}, m.version || "-"),
        el("td", {}, /^https?:\/\//.test(url) && !m.self ? el("a", { href: new URL("ui/", url.endsWith("/") ? url : url + "/").href }, "dashboard") : ""));
    });
    $("members").replaceChildren(...rows);
    for (const s of document.querySelectorAll("#members .swatch")) s.style.background = s.dataset.colour;

    const pl = c.peer_list || {};
    const loaded = pl.loaded_at ? `, loaded at ${clock(new Date(pl.loaded_at))}` : "";
    $("peer-list").textContent = `Peer list: ${pl.source || "(none)"}, ${pl.peers} peers${loaded}`;
    const refusal = $("peer-refusal");
    refusal.hidden = !pl.refusal;
    refusal.textContent = pl.refusal ? `The peer list was refused at ${clock(new Date(pl.refusal.at))}: ${pl.refusal.reason} (the node keeps the list it had)` : "";

    const v = c.voters;
    const voters = $("voters");
    if (!v) {
      voters.replaceChildren("This node takes no part in leases.");
    } else {
      voters.replaceChildren(
        el("div", { "data-testid": "voters-current" }, `Lease voters: ${(v.current || []).join(", ") || "none"}`),
        v.changing
          ? el("div", { class: "warn", "data-testid": "voters-change" },
            `Voter change in progress, one member at a time: heading for ${(v.target || []).join(", ") || "none"}`)
          : el("div", { class: "muted", "data-testid": "voters-change" }, "No voter change in progress."));
    }

    const sum = $("partition-summary");
    if (c.partitions) {
      const unrec = Object.entries(c.partitions.unreconciled || {}).map(([id, n]) => `${id}: ${n}`).join(", ");
      sum.textContent = `${c.partitions.count} partitions, ${c.partitions.without_master ? c.partitions.without_master + " without a master" : "every one with a master"} (this node's partition table)` +
        (unrec ? `; partitions with unchecked writes of an earlier tenure: ${unrec}` : "");
    } else {
      sum.textContent = "This node keeps no partition table.";
    }
  }

  function arc(p, n, r0, r1) {
    const cx = 160, cy = 160;
    const gap = n > 1 ? Math.min(0.004, Math.PI / n / 4) : 0;
    const a0 = (p / n) * 2 * Math.PI - Math.PI / 2 + gap;
    const a1 = ((p + 1) / n) * 2 * Math.PI - Math.PI / 2 - gap;
    const pt = (r, a) => `${(cx + r * Math.cos(a)).toFixed(2)} ${(cy + r * Math.sin(a)).toFixed(2)}`;
    const large = a1 - a0 > Math.PI ? 1 : 0;
    if (n === 1) {
      return `M ${pt(r1, 0)} A ${r1} ${r1} 0 1 1 ${pt(r1, Math.PI)} A ${r1} ${r1} 0 1 1 ${pt(r1, 0)} Z M ${pt(r0, 0)} A ${r0} ${r0} 0 1 0 ${pt(r0, Math.PI)} A ${r0} ${r0} 0 1 0 ${pt(r0, 0)} Z`;
    }
    return `M ${pt(r1, a0)} A ${r1} ${r1} 0 ${large} 1 ${pt(r1, a1)} L ${pt(r0, a1)} A ${r0} ${r0} 0 ${large} 0 ${pt(r0, a0)} Z`;
  }

  // ringSize is how many partitions the ring draws: the table's rows, or
  // the count the node gave when it gave no table.
  function ringSize() {
    const c = state.cluster;
    return state.partitions.length || (c && c.partitions ? c.partitions.count : 0);
  }

  function renderRing() {
    const n = ringSize();
    const svg = $("ring");
    if (svg.childElementCount !== n + 2) {
      const paths = [];
      for (let p = 0; p < n; p++) {
        paths.push(el("path", { d: arc(p, n, 100, 150), "data-testid": `partition-${p}`, "data-partition": p, onclick: () => select(p) }, el("title", {}, `partition ${p}`)));
      }
      svg.replaceChildren(...paths,
        el("text", { x: 160, y: 155, "text-anchor": "middle", id: "ring-centre", "font-size": "14" }, ""),
        el("text", { x: 160, y: 175, "text-anchor": "middle", id: "ring-centre2", "font-size": "11", fill: "#667085" }, ""));
    }
    const byMaster = new Map();
    let known = 0;
    for (let p = 0; p < n; p++) {
      const path = svg.querySelector(`[data-partition="${p}"]`);
      const v = state.partitions[p];
      const master = v ? v.master || "" : null;
      if (v) known++;
      if (master !== null) byMaster.set(master, (byMaster.get(master) || 0) + 1);
      path.setAttribute("fill", master === null ? UNKNOWN : colourOf(master));
      path.setAttribute("data-master", master === null ? "?" : master);
      path.setAttribute("data-epoch", v ? v.epoch : "");
      path.classList.toggle("moving", state.moves.has(p));
      path.classList.toggle("selected", state.selected === p);
      path.firstChild.textContent = v
        ? `partition ${p}: master ${master || "none"}, epoch ${v.epoch}`
        : `partition ${p}: not known`;
    }
    $("ring-centre").textContent = state.selected !== null ? `partition ${state.selected}` : `${n} partitions`;
    $("ring-centre2").textContent = known < n ? `${n - known} not known` : `${state.moves.size} moving`;

    const legend = [...byMaster.entries()].sort((a, b) => naturalCompare(a[0], b[0])).map(([id, count]) =>
      el("li", { "data-testid": `legend-${id || "none"}` }, el("span", { class: "swatch", "data-colour": id ? colourOf(id) : NO_MASTER }),
        `${id || "no master"}: ${count} partition${count === 1 ? "" : "s"}`));
    if (known < n) legend.push(el("li", {}, el("span", { class: "swatch", "data-colour": UNKNOWN }), `not known: ${n - known}`));
    legend.push(el("li", { class: "muted" }, el("span", { class: "swatch moving-swatch", "data-colour": "#ffffff" }), "dashed outline: moving"));
    $("ring-legend").replaceChildren(...legend);
    for (const s of document.querySelectorAll("#ring-legend .swatch")) s.style.background = s.dataset.colour;

    const re = $("ring-error");
    re.hidden = state.ringError === "";
    re.textContent = state.ringError;
    renderDetail();
  }

  function select(p) {
    state.selected = state.selected === p ? null : p;
    renderRing();
  }

  function renderDetail() {
    const box = $("partition-detail");
    const p = state.selected;
    if (p === null) {
      box.replaceChildren("Click a partition.");
      return;
    }
    const v = state.partitions[p];
    if (!v) {
      box.replaceChildren(`Partition ${p}: not known.`);
      return;
    }
    // Member states and replicas come from the same answer as the row.
    const c = state.cluster;
    const states = new Map((c.members || []).map((m) => [m.id, m.state]));
    const withState = (ids) => (ids || []).map((id) => `${id}${states.get(id) ? " (" + states.get(id) + ")" : ""}`).join(", ") || "-";
    const rows = [
      ["Partition", p, "detail-partition"],
      ["Master", v.master ? withState([v.master]) : "none", "detail-master"],
      ["Epoch", v.epoch, "detail-epoch"],
      ["Preferred master", v.preferred_master || "-", "detail-preferred"],
      ["Responsible", withState(v.responsible), "detail-responsible"],
      ["Position here", v.position ? pos(v.position) : `- (${c.node} holds no copy)`, "detail-position"],
    ];
    for (const r of (c.replication || []).filter((l) => l.partition === p)) {
      rows.push([`Replica ${r.replica}`, `acknowledged ${pos(r.acked)}, ${r.behind} behind${r.lag_ms ? ", " + r.lag_ms + " ms" : ""}${r.catching_up ? ", catching up" : ""}`, `detail-replica-${r.replica}`]);
    }
    const m = state.moves.get(p);
    if (m) rows.push(["Moving", `${m.move.from} → ${m.move.to}, ${m.move.phase}`, "detail-move"]);
    box.replaceChildren(
      el("table", {}, el("tbody", {}, rows.map(([k, val, id]) => el("tr", {}, el("th", {}, k), el("td", { "data-testid": id }, val))))),
      el("div", { class: "muted" }, `as ${c.node} saw it at ${clock(state.answeredAt)} (GET /v1/cluster?partitions=1)`));
  }

  function moveBar(p, m) {
    const pct = copyPercent(m);
    const text = m.phase === "copying"
      ? (m.documents_total ? `${m.documents_copied} of ${m.documents_total} documents copied (${pct}%)` : `copying, ${m.documents_copied} documents so far (total not counted yet)`)
      : `copy done (100%)${m.behind ? `, ${m.behind} changes behind` : ""}`;
    return progressBar(`move-${p}`, pct, text, `partition ${p} moving from ${m.from} to ${m.to}`);
  }

  // doneBar is the bar of a move no longer listed: full once the first
  // answer after it left shows the partition mastered by the move's
  // target (the move finished), and otherwise as far as its copy was
  // seen to get (the move was given up, or its outcome is not known yet).
  function doneBar(d, v) {
    const p = d.move.partition;
    const label = `partition ${p} moved to ${d.move.to}`;
    if (v && v.master === d.move.to) {
      return progressBar(`moved-${p}`, 100, `moved: ${d.move.to} masters it (100%)`, label);
    }
    const copy = d.maxPct === null ? "copy not counted" : `copy reached ${d.maxPct}%`;
    return progressBar(`moved-${p}`, d.maxPct, v ? `not moved: master ${v.master || "none"}; ${copy}` : `outcome not known yet; ${copy}`, label);
  }

  // progressBar draws a bar pct percent full (null: indeterminate).
  function progressBar(testid, pct, text, label) {
    const fill = el("div", { class: "bar-fill", "data-width": pct === null ? "" : pct });
    const bar = el("div", {
      class: `bar${pct === null ? " indeterminate" : ""}`, role: "progressbar", "data-testid": testid,
      "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": pct === null ? null : pct, "aria-valuetext": text,
      "aria-label": label,
    }, fill, el("span", { class: "bar-text" }, text));
    if (pct !== null) fill.style.width = `${pct}%`;
    return bar;
  }

  function renderMoves() {
    const box = $("moves");
    if (!state.cluster) return;
    const listed = [...state.moves.entries()].sort((a, b) => a[0] - b[0]);
    // Each node knows the moves from itself; the node asked adds the
    // others' and names those it could not ask.
    const unknown = state.cluster.moves_unknown || [];
    const rows = listed.length === 0
      ? [el("p", { "data-testid": "moves-none" }, unknown.length ? "No partition is moving from the members that answered." : "No partition is moving.")]
      : listed.map(([p, seen]) => el("div", { class: "move", "data-testid": `move-row-${p}` },
        el("div", { class: "move-head" },
          el("span", {}, el("strong", {}, `partition ${p}`), ` ${seen.move.from} → ${seen.move.to}`),
          el("span", { "data-testid": `move-phase-${p}` }, seen.move.phase),
          el("span", { class: "muted" }, `${seen.move.behind} changes behind · since ${clock(seen.firstSeen)}`)),
        moveBar(p, seen.move)));
    if (unknown.length) {
      rows.push(el("p", { class: "warn", "data-testid": "moves-unknown" },
        "Moves not known from " + unknown.map((u) => `${u.node} (${u.reason})`).join(", ")));
    }
    box.replaceChildren(...rows);
    const done = $("moves-done");
    if (state.movesDone.length === 0) {
      done.replaceChildren();
      return;
    }
    done.replaceChildren(el("h3", {}, "No longer listed"), el("ul", {}, state.movesDone.map((d) => {
      // The first answer after the move left the list says who masters
      // the partition now.
      const known = state.answeredAt > d.gone ? state.partitions[d.move.partition] : undefined;
      const now = known ? `master now ${known.master || "none"} (epoch ${known.epoch})` : "master not known since";
      return el("li", { "data-testid": `move-done-${d.move.partition}` },
        `partition ${d.move.partition} ${d.move.from} → ${d.move.to}: last seen ${d.move.phase} ` +
          `(${d.maxPct === null ? "copy not counted yet" : "copy " + d.maxPct + "%"}), gone at ${clock(d.gone)}; `,
        el("span", { "data-testid": `move-done-master-${d.move.partition}` }, now),
        doneBar(d, known));
    })));
  }

  function renderLag() {
    const svg = $("lag-chart");
    const W = 600, H = 180, L = 46, R = 8, T = 8, B = 22;
    const now = Date.now();
    const replicas = new Set();
    const metric = state.lagMetric;
    let max = 0;
    for (const s of state.lag) {
      for (const [id, r] of Object.entries(s.per)) { replicas.add(id); max = Math.max(max, r[metric]); }
    }
    const top = metric === "lagMs" ? Math.max(100, max) : Math.max(10, max);
    const topLabel = metric === "behind" ? `${top} changes` : top >= 1000 ? `${(top / 1000).toFixed(1)} s` : `${top} ms`;
    const x = (t) => L + ((t - (now - LAG_WINDOW_MS)) / LAG_WINDOW_MS) * (W - L - R);
    const y = (v) => H - B - (v / top) * (H - T - B);
    const parts = [
      el("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }),
      el("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }),
      el("text", { x: L + 4, y: T + 8 }, topLabel),
      el("text", { x: L - 4, y: H - B, "text-anchor": "end" }, "0"),
      el("text", { x: L, y: H - 6 }, "−5 min"),
      el("text", { x: W - R, y: H - 6, "text-anchor": "end" }, "now"),
    ];
    for (const id of [...replicas].sort(naturalCompare)) {
      // A replica missing from a sample (not a replica of this node's
      // partitions then) breaks its line.
      let run = [];
      const flush = () => {
        if (run.length > 0) parts.push(el("polyline", { points: run.join(" "), stroke: colourOf(id), "data-testid": `lag-line-${id}` }));
        run = [];
      };
      for (const s of state.lag) {
        const r = s.per[id];
        if (!r) { flush(); continue; }
        run.push(`${x(s.t).toFixed(1)},${y(r[metric]).toFixed(1)}`);
      }
      if (run.length === 1) run.push(run[0]);
      flush();
    }
    svg.replaceChildren(...parts);

    const last = state.lag.length > 0 ? state.lag[state.lag.length - 1].per : {};
    const rows = Object.entries(last).sort((a, b) => naturalCompare(a[0], b[0])).map(([id, r]) =>
      el("tr", { "data-testid": `lag-${id}` },
        el("td", {}, el("span", { class: "swatch", "data-colour": colourOf(id) }), id),
        el("td", { class: "num" }, r.partitions),
        el("td", { class: "num" }, r.behind),
        el("td", { class: "num" }, `${r.lagMs} ms`),
        el("td", { class: "num" }, r.catchingUp),
        el("td", { class: "num" }, r.copying ? `${r.copying} (${r.copied} of ${r.toCopy || "?"} documents)` : "0")));
    if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "This node masters no partition with a replica.")));
    $("lag-rows").replaceChildren(...rows);
    for (const s of document.querySelectorAll("#lag-rows .swatch")) s.style.background = s.dataset.colour;
  }

  function renderRollbacks() {
    const box = $("rollbacks");
    const rb = state.rollbacks;
    if (!rb) return;
    if (rb.error) {
      box.replaceChildren(el("p", { class: "warn" }, `GET /v1/admin/rollback answered ${rb.error}`));
      return;
    }
    const list = rb.rolled_back || [];
    const count = el("p", { "data-testid": "rollback-count" }, list.length === 0
      ? `No write was rolled back on ${rb.node}.`
      : `${list.length}${rb.more ? "+" : ""} document state${list.length === 1 ? "" : "s"} rolled back on ${rb.node}` +
        (rb.more ? ` (the oldest ${list.length} shown)` : "") + ": writes it acknowledged as master that the next master never had.");
    if (list.length === 0) {
      box.replaceChildren(count);
      return;
    }
    box.replaceChildren(count, el("table", {},
      el("thead", {}, el("tr", {}, ["Rolled back", "Partition", "Document", "Version", "Position", "New epoch", "Body"].map((h) => el("th", {}, h)))),
      el("tbody", {}, list.map((d) => el("tr", {},
        el("td", {}, clock(new Date(d.rolled_back_at))),
        el("td", { class: "num" }, d.partition),
        el("td", {}, `${d.user}/${d.collection}/${d.id}`),
        el("td", { class: "num" }, d.version + (d.deleted ? " (delete)" : "")),
        el("td", {}, pos(d.position)),
        el("td", { class: "num" }, d.new_epoch),
        el("td", {}, d.body ? el("details", {}, el("summary", {}, "body"), el("pre", {}, JSON.stringify(d.body, null, 2))) : "-"))))));
  }

  // ---- the document browser ------------------------------------------

  function userPath(user) { return `v1/users/${encodeURIComponent(user)}`; }

  function docError(text) {
    const e = $("doc-error");
    e.hidden = !text;
    e.textContent = text || "";
  }

  async function listCollections() {
    const user = $("doc-user").value.trim();
    docError("");
    if (!user) { docError("Name a user."); return; }
    let r;
    try {
      r = await call(`${userPath(user)}/collections`);
    } catch (e) {
      docError("The node did not answer.");
      return;
    }
    if (r.status !== 200) { docError(`GET /v1/users/${user}/collections answered ${problemText(r)}`); return; }
    const colls = r.body.collections || [];
    $("collections").replaceChildren(...(colls.length === 0
      ? [el("span", { class: "muted", "data-testid": "collections-none" }, `${user} has no collection.`)]
      : colls.map((c) => el("button", {
        type: "button", "data-testid": `coll-${c.name}`,
        onclick: () => { $("doc-coll").value = c.name; firstPage(); },
      }, `${c.name} (${c.count})`))));
  }

  function firstPage() {
    state.doc.cursors = [""];
    state.doc.page = 0;
    runQuery();
  }

  async function runQuery() {
    const d = state.doc;
    const user = $("doc-user").value.trim();
    const coll = $("doc-coll").value.trim();
    docError("");
    if (!user || !coll) { docError("Name a user and a collection."); return; }
    const q = new URLSearchParams();
    const filter = $("doc-filter").value.trim();
    const sort = $("doc-sort").value.trim();
    const limit = $("doc-limit").value.trim();
    if (filter) q.set("filter", filter);
    if (sort) q.set("sort", sort);
    if (limit) q.set("limit", limit);
    if (d.cursors[d.page]) q.set("after", d.cursors[d.page]);
    let r;
    try {
      r = await call(`${userPath(user)}/collections/${encodeURIComponent(coll)}/documents?${q}`);
    } catch (e) {
      docError("The node did not answer.");
      return;
    }
    if (r.status !== 200) {
      docError(`GET /v1/users/${user}/collections/${coll}/documents answered ${problemText(r)}`);
      $("doc-next").disabled = true;
      return;
    }
    const docs = r.body.documents || [];
    d.next = r.body.next || "";
    $("doc-next").disabled = !d.next;
    $("doc-first").disabled = d.page === 0;
    $("doc-page").textContent = `page ${d.page + 1}: ${docs.length} document${docs.length === 1 ? "" : "s"}${d.next ? "" : " (last page)"}`;
    $("doc-results").replaceChildren(...(docs.length === 0
      ? [el("p", { class: "muted" }, "No document matches.")]
      : docs.map((doc) => el("pre", { class: "doc", "data-testid": `doc-${doc._id}` }, JSON.stringify(doc, null, 2)))));
  }

  function nextPage() {
    const d = state.doc;
    if (!d.next) return;
    d.cursors[d.page + 1] = d.next;
    d.page++;
    runQuery();
  }

  // ---- start ---------------------------------------------------------

  function useToken(token) {
    state.token = token;
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
    state.authProblem = "";
    renderBanners();
    wakeAll();
  }

  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = $("token-input").value.trim().replace(/^Bearer\s+/i, "");
    $("token-input").value = "";
    useToken(t);
  });
  $("token-forget").addEventListener("click", () => useToken(""));
  $("doc-list").addEventListener("click", listCollections);
  $("doc-form").addEventListener("submit", (e) => { e.preventDefault(); firstPage(); });
  $("doc-next").addEventListener("click", nextPage);
  $("doc-first").addEventListener("click", firstPage);
  for (const b of document.querySelectorAll("[data-lag-metric]")) {
    b.addEventListener("click", () => {
      state.lagMetric = b.dataset.lagMetric;
      for (const o of document.querySelectorAll("[data-lag-metric]")) o.setAttribute("aria-pressed", String(o === b));
      renderLag();
    });
  }

  renderBanners();
  clusterLoop();
})();
