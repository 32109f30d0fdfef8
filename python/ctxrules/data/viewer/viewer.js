// ctxrules view: the page's script (no libraries, no network beyond its own server).
//
// Every element is built with createElement and every piece of data goes in through
// textContent, createTextNode or setAttribute: nothing from a transcript is ever parsed
// as HTML.  Answers come from the server's /api/NAME?QUERY, or, in an exported file,
// from the answers embedded under the same keys (#ctxrules-data).
"use strict";

(function () {
  const STATES = ["full", "aged", "cleared", "summarized", "summary"];
  const ROLES = new Set(["user", "assistant", "tool", "system"]);
  const BODY_SHOWN = 200000; // characters of a request body shown before "show all"
  const TEXT_SHOWN = 240; // characters of an item's text in the table

  // -- answers ------------------------------------------------------------------------

  class ViewError extends Error {}

  const embedded = document.getElementById("ctxrules-data");
  const EXPORT = embedded ? JSON.parse(embedded.textContent) : null;
  const cache = new Map();
  let pending = 0;

  // The same string as ctxrules.cli.viewdata.request_key: empty values left out, keys
  // sorted, both encoded with encodeURIComponent.
  function requestKey(name, params) {
    const keys = Object.keys(params)
      .filter((k) => params[k] !== "" && params[k] !== null && params[k] !== undefined)
      .sort();
    if (!keys.length) return name;
    const query = keys.map(
      (k) => encodeURIComponent(k) + "=" + encodeURIComponent(String(params[k]))
    );
    return name + "?" + query.join("&");
  }

  function setPending(delta) {
    pending += delta;
    document.documentElement.dataset.pending = String(pending);
  }

  async function fetchAnswer(key) {
    if (EXPORT) {
      const found = EXPORT.answers[key];
      if (!found) {
        throw new ViewError(
          "not in this file: an export holds the session at its HEAD " +
            "(`ctxrules view` serves the rest)"
        );
      }
      if ("error" in found) throw new ViewError(found.error);
      return found.ok;
    }
    const response = await fetch("/api/" + key, { headers: { Accept: "application/json" } });
    let body;
    try {
      body = await response.json();
    } catch (err) {
      throw new ViewError("the server answered " + response.status + " without JSON");
    }
    if (!response.ok) throw new ViewError(body && body.error ? body.error : response.statusText);
    return body;
  }

  // One request per key; a failed one is asked again next time.
  async function ask(name, params) {
    const key = requestKey(name, params || {});
    if (!cache.has(key)) {
      cache.set(key, fetchAnswer(key));
    }
    setPending(1);
    try {
      return await cache.get(key);
    } catch (err) {
      cache.delete(key);
      throw err;
    } finally {
      setPending(-1);
    }
  }

  function forget(name) {
    for (const key of [...cache.keys()]) {
      if (key === name || key.startsWith(name + "?")) cache.delete(key);
    }
  }

  // -- elements -----------------------------------------------------------------------

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = String(value);
      else if (key === "data") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // Empty ``node`` and put ``children`` in (null and false left out, as el() does;
  // replaceChildren itself would turn them into the text "null").
  function fill(node, ...children) {
    node.replaceChildren();
    return append(node, children);
  }

  function svg(tag, attrs) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    return node;
  }

  const $ = (id) => document.getElementById(id);
  const fmt = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : String(n));
  const pct = (part, whole) => (whole ? ((100 * part) / whole).toFixed(1) + "%" : "-");
  const roleClass = (role) => "role-" + (ROLES.has(role) ? role : "other");
  const stateClass = (state) => "state-" + (STATES.includes(state) ? state : "other");
  const short = (id) => (typeof id === "string" && id.length > 14 ? id.slice(0, 14) + "…" : id);

  function cut(text, width) {
    const flat = String(text).replace(/\s+/g, " ").trim();
    return flat.length <= width ? flat : flat.slice(0, width - 1) + "…";
  }

  // A node's time; 0 is what importers store when a transcript has none.
  function when(epoch) {
    if (typeof epoch !== "number" || !isFinite(epoch) || epoch === 0) return "";
    return new Date(epoch * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  }

  function showError(target, err) {
    fill(target, el("div", { class: "error", text: String(err.message || err) }));
  }

  // A panel's answer: ``waiting`` shown in ``box`` (if given) while it comes, then the
  // elements ``render`` makes of it, or the error.  Returns the answer, or null when
  // ``current()`` says the page moved on meanwhile (the box is left to the newer one)
  // or the request failed.
  async function showAnswer(box, waiting, name, params, current, render) {
    if (waiting) fill(box, el("p", { class: "muted", text: waiting }));
    try {
      const answer = await ask(name, params);
      if (!current()) return null;
      fill(box, ...render(answer));
      return answer;
    } catch (err) {
      showError(box, err);
      return null;
    }
  }

  function badge(text, cls, title) {
    return el("span", { class: "badge " + (cls || ""), text, title });
  }

  function stateBadge(state) {
    return badge(state, "state " + stateClass(state));
  }

  // -- state --------------------------------------------------------------------------

  const view = {
    providers: [],
    session: null,
    graph: null,
    byId: new Map(),
    forksAt: new Map(),
    choice: new Map(), // alternative group (its first id) -> the id shown
    turn: null, // the conversation node whose turn is shown
    node: null, // the node whose detail is shown
    timeline: null,
    commit: null,
    tab: "timeline",
  };

  // -- history graph ------------------------------------------------------------------

  // Which alternative of a group is shown: the one picked with < N/M >, else the given
  // default, else the one on the branch to HEAD, else the newest.
  function pick(group, fallback) {
    const chosen = view.choice.get(group[0]);
    if (chosen && group.includes(chosen)) return chosen;
    if (fallback && group.includes(fallback)) return fallback;
    return group.find((id) => view.byId.get(id).on_branch) || group[group.length - 1];
  }

  function renderGraph() {
    const g = view.graph;
    const box = $("graph");
    const scroll = box.scrollTop;
    fill(box, g.roots.length ? thread(g.roots, null) : el("p", { text: "no nodes" }));
    box.scrollTop = scroll;
  }

  // A conversation from its first group of alternatives on: one row per shown node, the
  // calls it made under it, then its shown child, and so on (a loop, not recursion:
  // a conversation may be thousands of turns long).
  function thread(first, fallback) {
    const box = el("div", { class: "thread" });
    let group = first;
    while (group && group.length) {
      const node = view.byId.get(pick(group, fallback));
      fallback = null;
      box.append(row(node, group));
      if (node.calls.length) box.append(calls(node));
      group = node.next;
    }
    return box;
  }

  function calls(node) {
    const box = el("div", { class: "calls" });
    for (const id of node.calls) {
      const call = view.byId.get(id);
      const group = call.alternatives.length ? call.alternatives : [id];
      const shown = view.byId.get(pick(group, id));
      if (shown.frame) {
        box.append(
          el(
            "div",
            { class: "frame" },
            el("div", { class: "frame-head", text: "sub-agent" }),
            thread(group, id)
          )
        );
      } else {
        box.append(row(shown, group));
        if (shown.calls.length) box.append(calls(shown));
      }
    }
    return box;
  }

  function switcher(node, group) {
    const at = group.indexOf(node.id);
    const go = (step) => (event) => {
      event.stopPropagation();
      const next = group[(at + step + group.length) % group.length];
      view.choice.set(group[0], next);
      renderGraph();
    };
    return el(
      "span",
      { class: "switch", title: "alternatives here (display only: HEAD does not move)" },
      el("button", { type: "button", class: "prev", text: "‹", onclick: go(-1) }),
      el("span", { class: "pos", text: at + 1 + "/" + group.length }),
      el("button", { type: "button", class: "next", text: "›", onclick: go(1) })
    );
  }

  function row(node, group) {
    const g = view.graph;
    const classes = ["node", roleClass(node.role)];
    if (node.on_branch) classes.push("on-branch");
    if (node.id === g.head) classes.push("head");
    if (node.inherited) classes.push("inherited");
    if (node.id === view.node || node.id === view.turn) classes.push("selected");
    if (node.caller === null) classes.push("turn");
    const label = node.role + (node.name ? " " + node.name : "");
    const line = el(
      "div",
      {
        class: classes.join(" "),
        data: { id: node.id },
        tabindex: "0",
        title: node.id + " [" + node.seq + "] " + when(node.created_at),
        onclick: () => select(node),
        onkeydown: (event) => {
          if (event.key === "Enter") select(node);
        },
      },
      el("span", { class: "seq", text: node.seq }),
      el("span", { class: "role " + roleClass(node.role), text: label }),
      group.length > 1 ? switcher(node, group) : null,
      node.id === g.head ? badge("HEAD", "head-badge") : null,
      node.commits ? badge("●", "commit-dot", node.commits + " commit(s) stored here") : null,
      node.is_error ? badge("error", "error-badge") : null,
      node.merge ? badge("merge", "merge-badge", "merge of " + peers(node.merge)) : null,
      node.attach ? badge("attach", "attach-badge", attachText(node.attach)) : null,
      (view.forksAt.get(node.id) || []).map((s) => badge("fork → " + short(s), "fork-badge", s)),
      el("span", { class: "preview", text: node.preview })
    );
    if (!node.compaction) return line;
    return el("div", { class: "with-boundary" }, boundary(node.compaction), line);
  }

  function peers(record) {
    const list = Array.isArray(record.peers) ? record.peers : [];
    return list.map((p) => (p && p.session) || "?").join(", ") || "?";
  }

  function attachText(record) {
    return "attaches " + (record.session || "?") + " at " + (record.head || "?");
  }

  function boundary(record) {
    const tokens = (n) => (typeof n === "number" ? fmt(n) : "?");
    if (record.invalid) {
      return el("div", { class: "boundary", text: "compaction (invalid record: " + record.invalid + ")" });
    }
    const pivot = record.pivot ? " " + record.direction + " " + record.pivot : "";
    const text =
      "compaction (" +
      (record.trigger || "?") +
      pivot +
      "): " +
      tokens(record.tokens_before) +
      " → " +
      tokens(record.tokens_after) +
      " tokens" +
      (record.folded_items ? ", " + record.folded_items + " items folded" : "");
    return el("div", { class: "boundary", text });
  }

  // -- a node -------------------------------------------------------------------------

  function select(node) {
    view.node = node.id;
    markSelected();
    showNode(node.id);
    if (node.caller === null) selectTurn(node.id);
  }

  function markSelected() {
    for (const line of document.querySelectorAll("#graph .node")) {
      const id = line.dataset.id;
      line.classList.toggle("selected", id === view.node || id === view.turn);
    }
  }

  function showNode(id) {
    showAnswer(
      $("node-detail"),
      "loading " + id + " …",
      "node",
      { session: view.session, id },
      () => view.node === id,
      nodeView
    );
  }

  function nodeView(node) {
    return [
      el(
        "div",
        { class: "node-head" },
        el("span", { class: "role " + roleClass(node.role), text: node.role }),
        node.name ? el("b", { text: " " + node.name }) : null,
        el("span", {
          class: "muted",
          text: [" " + node.id, "seq " + node.seq, when(node.created_at)].filter(Boolean).join(" · "),
        })
      ),
      node.input !== null && node.input !== undefined
        ? el("details", {}, el("summary", { text: "input" }), pre(node.input))
        : null,
      content(node.output),
      Object.keys(node.metadata || {}).length
        ? el("details", {}, el("summary", { text: "metadata" }), pre(node.metadata))
        : null,
    ];
  }

  function pre(value) {
    const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
    return el("pre", { class: "text", text });
  }

  // A node's content: a string, or a list of blocks shown by type.
  function content(output) {
    if (typeof output === "string") return output ? pre(output) : null;
    if (!Array.isArray(output)) return pre(output);
    return el(
      "div",
      { class: "blocks" },
      output.map((block) => {
        const kind = block && typeof block.type === "string" ? block.type : "block";
        let body;
        if (kind === "text") body = pre(block.text);
        else if (kind === "thinking") body = pre(block.thinking);
        else if (kind === "tool_use") body = pre({ name: block.name, input: block.input });
        else if (kind === "tool_result") body = content(block.content);
        else if (kind === "image") body = el("span", { class: "muted", text: "(image)" });
        else body = pre(block);
        return el("div", { class: "block" }, el("div", { class: "block-kind", text: kind }), body);
      })
    );
  }

  // -- a turn: its timeline, usage and request ----------------------------------------

  function selectTurn(id) {
    view.turn = id;
    markSelected();
    loadTimeline(id);
    if (view.tab === "usage") loadUsage();
    if (view.tab === "request") loadRequest();
  }

  async function loadTimeline(head) {
    const list = $("timeline");
    $("timeline-meta").textContent = "making the commit at each turn …";
    list.replaceChildren();
    $("commit").replaceChildren();
    try {
      const timeline = await ask("timeline", { session: view.session, head });
      if (view.turn !== head) return;
      view.timeline = timeline;
      const n = timeline.commits.length;
      $("timeline-meta").textContent =
        n +
        " commit(s), one per turn" +
        (n < timeline.turns ? " (the last " + n + " of " + timeline.turns + " turns)" : "") +
        " · click one for its items";
      fill(list, ...timeline.commits.map((c, i) => timelineRow(c, i)));
      fillDiffChoices();
      if (n) showCommit(timeline.commits[n - 1].id);
      if (!EXPORT) refreshGraph();
    } catch (err) {
      if (view.turn === head) showError($("timeline-meta"), err);
    }
  }

  function stateBar(byState, total) {
    const bar = el("span", { class: "state-bar" });
    for (const state of STATES) {
      const tokens = (byState[state] || {}).tokens || 0;
      if (!tokens || !total) continue;
      const part = el("span", { class: stateClass(state), title: state + " " + fmt(tokens) });
      part.style.width = ((100 * tokens) / total).toFixed(2) + "%";
      bar.append(part);
    }
    return bar;
  }

  function timelineRow(commit, index) {
    const node = view.byId.get(commit.head_node_id);
    const byState = commit.totals.by_state;
    const total = STATES.reduce((sum, s) => sum + ((byState[s] || {}).tokens || 0), 0);
    return el(
      "li",
      {
        class: "commit-row",
        data: { id: commit.id },
        tabindex: "0",
        onclick: () => showCommit(commit.id),
        onkeydown: (event) => {
          if (event.key === "Enter") showCommit(commit.id);
        },
      },
      el("span", { class: "idx", text: "#" + (index + 1) }),
      node ? el("span", { class: "role " + roleClass(node.role), text: node.role }) : null,
      el("span", { class: "items", text: commit.totals.items + " items" }),
      el("span", { class: "tokens", text: fmt(commit.total_tokens) + " tok" }),
      stateBar(byState, total),
      commit.notes.length ? badge(commit.notes.length + " note(s)", "notes-badge") : null,
      el("span", { class: "preview", text: node ? node.preview : commit.head_node_id })
    );
  }

  async function showCommit(id) {
    view.commit = id;
    for (const line of document.querySelectorAll("#timeline .commit-row")) {
      line.classList.toggle("selected", line.dataset.id === id);
    }
    const commit = await showAnswer(
      $("commit"),
      "loading " + id + " …",
      "commit",
      { session: view.session, id },
      () => view.commit === id,
      commitView
    );
    if (!commit) return;
    const ids = view.timeline ? view.timeline.commits.map((c) => c.id) : [];
    const at = ids.indexOf(id);
    if (at > 0) setDiff(ids[at - 1], id);
  }

  function commitView(commit) {
    const totals = commit.totals.by_state;
    const out = [
      el(
        "div",
        { class: "commit-head" },
        el("b", { text: "commit " + commit.id }),
        el("span", {
          class: "muted",
          text: " at " + commit.head_node_id + " · rules " + commit.rules_version,
        })
      ),
      el(
        "div",
        { class: "totals" },
        el("span", { class: "sent", text: fmt(commit.total_tokens) + " tokens sent" }),
        el("span", { class: "item-count", text: commit.totals.items + " items" }),
        STATES.filter((s) => totals[s] && totals[s].items).map((s) =>
          el(
            "span",
            { class: "state-total" },
            stateBadge(s),
            " " + totals[s].items + " · " + fmt(totals[s].tokens) + " tok"
          )
        )
      ),
    ];
    if (commit.parent_ids.length > 1) {
      out.push(el("div", { class: "merge-note", text: "merge of " + commit.parent_ids.join(", ") }));
    }
    out.push(
      el("h3", { text: "What the rules did" }),
      commit.notes.length
        ? el("ul", { class: "notes" }, commit.notes.map((n) => el("li", { text: n })))
        : el("p", { class: "muted", text: "nothing: every item as it came" })
    );
    if (commit.summary) {
      out.push(el("details", {}, el("summary", { text: "summary" }), pre(commit.summary)));
    }
    out.push(el("h3", { text: "Items" }), itemTable(commit.items));
    return out;
  }

  // One row of facts per item, and under it a row with the item's text (what the
  // model is sent for it) across the table.
  function itemTable(items) {
    const columns = ["#", "role", "state", "tokens", "reason", "attached", "flags"];
    const head = el(
      "tr",
      {},
      columns.map((h) => el("th", { text: h, class: "col-" + (h === "#" ? "num" : h) }))
    );
    const body = el("tbody");
    items.forEach((item, i) => {
      const flags = [
        item.locked ? "locked" : "",
        item.is_anchor ? "anchor" : "",
        item.merged_into ? "→ " + short(item.merged_into) : "",
      ].filter(Boolean);
      const state = stateClass(item.state);
      body.append(
        el(
          "tr",
          { class: "item " + state, data: { node: item.source_node_id } },
          el("td", { class: "num", text: i }),
          el(
            "td",
            { class: "role-cell" },
            el("span", {
              class: "role " + roleClass(item.role),
              text: item.role + (item.name ? " " + item.name : ""),
            })
          ),
          el("td", { class: "state-cell" }, stateBadge(item.state)),
          el("td", { class: "num", text: fmt(item.tokens) }),
          el("td", { class: "reason", text: item.reason }),
          el("td", { class: "attached", text: item.attached_from || "" }),
          el("td", {
            class: "flags",
            text: flags.join(" "),
            title: item.merged_into ? "folded into " + item.merged_into : null,
          })
        ),
        el("tr", { class: "item-text " + state }, el("td"), textCell(item.text || "", columns.length - 1))
      );
    });
    return el("div", { class: "table-wrap" }, el("table", { class: "items" }, el("thead", {}, head), body));
  }

  // An item's text, cut to TEXT_SHOWN characters; a click shows all of it, and again less.
  function textCell(text, span) {
    const cell = el("td", { class: "text", colspan: span, text: cut(text, TEXT_SHOWN) });
    if (text.length > TEXT_SHOWN) {
      cell.classList.add("more");
      cell.title = "click for the whole text";
      cell.addEventListener("click", () => {
        const open = cell.classList.toggle("open");
        cell.textContent = open ? text : cut(text, TEXT_SHOWN);
      });
    }
    return cell;
  }

  // -- diff ---------------------------------------------------------------------------

  function fillDiffChoices() {
    const commits = view.timeline ? view.timeline.commits : [];
    for (const id of ["diff-a", "diff-b"]) {
      fill(
        $(id),
        ...commits.map((c, i) =>
          el("option", { value: c.id, text: "#" + (i + 1) + " " + short(c.id) })
        )
      );
    }
    if (commits.length > 1) setDiff(commits[commits.length - 2].id, commits[commits.length - 1].id);
    else fill($("diff"), el("p", { class: "muted", text: "one commit: nothing to diff" }));
  }

  function setDiff(a, b) {
    $("diff-a").value = a;
    $("diff-b").value = b;
    loadDiff();
  }

  function loadDiff() {
    const a = $("diff-a").value;
    const b = $("diff-b").value;
    if (!a || !b) return;
    showAnswer(
      $("diff"),
      null,
      "diff",
      { session: view.session, a, b },
      () => $("diff-a").value === a && $("diff-b").value === b,
      diffView
    );
  }

  function nodeLabel(id) {
    const node = view.byId.get(id);
    return node ? id + "  " + node.role + ": " + node.preview : id;
  }

  function diffView(d) {
    const section = (title, list, render) =>
      el(
        "div",
        { class: "diff-part" },
        el("h3", { text: title + " (" + list.length + ")" }),
        list.length ? el("ul", {}, list.map((x) => el("li", {}, render(x)))) : null
      );
    return [
      el("div", { class: "diff-head", text: "commit " + d.a + " → " + d.b }),
      el(
        "div",
        { class: "totals" },
        el("span", { text: "tokens " + fmt(d.tokens_a) + " → " + fmt(d.tokens_b) }),
        el("span", {
          class: "prefix",
          text:
            "shared prefix " + d.prefix_items + " items, " + fmt(d.prefix_tokens) +
            " tokens (what a prompt cache can reuse)",
        })
      ),
      section("added", d.added, (id) => nodeLabel(id)),
      section("removed", d.removed, (id) => nodeLabel(id)),
      section("changed state", d.changed, (c) => [
        stateBadge(c[1]), " → ", stateBadge(c[2]), " " + nodeLabel(c[0]),
      ]),
      section("rewritten", d.rewritten, (id) => nodeLabel(id)),
    ];
  }

  // -- usage --------------------------------------------------------------------------

  const CATEGORY_COLORS = [
    "#4e79a7", "#59a14f", "#9c755f", "#f28e2b", "#edc948", "#76b7b2",
    "#b07aa1", "#e15759", "#ff9da7", "#86bcb6", "#8cd17d",
  ];

  function categoryColor(category, index) {
    if (category.kind === "reserve") return "#bab0ac";
    if (category.kind === "buffer") return "#d9d4cf";
    if (category.kind === "free") return "#f1efec";
    return CATEGORY_COLORS[index % CATEGORY_COLORS.length];
  }

  function loadUsage() {
    const head = view.turn;
    showAnswer(
      $("usage"),
      "measuring …",
      "stats",
      { session: view.session, head },
      () => view.turn === head,
      usageView
    );
  }

  function usageView(s) {
    const u = s.usage;
    const cats = s.breakdown.categories;
    const colors = cats.map((c, i) => categoryColor(c, i));
    const whole = s.breakdown.window || 1;
    const bar = el("div", { class: "usage-bar" });
    cats.forEach((c, i) => {
      if (!c.tokens) return;
      const part = el("span", { title: c.name + " " + fmt(c.tokens) });
      part.style.width = ((100 * c.tokens) / whole).toFixed(3) + "%";
      part.style.background = colors[i];
      bar.append(part);
    });
    const legend = el(
      "table",
      { class: "legend" },
      el("thead", {}, el("tr", {}, ["", "category", "tokens", "share"].map((h) => el("th", { text: h })))),
      el(
        "tbody",
        {},
        cats.map((c, i) => {
          const swatch = el("span", { class: "swatch" });
          swatch.style.background = colors[i];
          return el(
            "tr",
            { class: "category", data: { name: c.name, kind: c.kind } },
            el("td", {}, swatch),
            el("td", { text: c.name }),
            el("td", { class: "num tokens", text: fmt(c.tokens) }),
            el("td", { class: "num", text: pct(c.tokens, u.window) })
          );
        })
      )
    );
    const b = s.budget;
    return [
      el(
        "div",
        { class: "usage-head" },
        el("b", { class: "used", text: fmt(u.total_used) }),
        " of " + fmt(u.window) + " tokens (" + pct(u.total_used, u.window) + "), ",
        el("span", { class: "basis", text: u.basis }),
        u.calibration !== undefined ? ", calibration " + u.calibration : "",
        " · level ",
        el("span", { class: "level level-" + String(s.level), text: s.level }),
        el("div", { class: "muted", text: s.provider + " " + s.model + " · at " + s.head })
      ),
      el("div", { class: "usage-graphics" }, ring(cats, colors, whole), el("div", {}, bar, legend)),
      el("p", {
        class: "muted",
        text:
          "thresholds: warn " + fmt(b.warn_tokens) + ", compact " + fmt(b.compact_tokens) +
          ", critical " + fmt(b.critical_tokens) + " (of " + fmt(b.usable) + " usable)",
      }),
      s.compactions.length
        ? el("ul", { class: "compactions" }, s.compactions.map((r) => el("li", {}, boundary(r))))
        : null,
    ];
  }

  // A ring of the categories, drawn with one stroked circle per category.
  function ring(cats, colors, whole) {
    const size = 160;
    const radius = 60;
    const around = 2 * Math.PI * radius;
    const art = svg("svg", {
      viewBox: "0 0 " + size + " " + size, width: size, height: size, class: "ring",
      role: "img", "aria-label": "window by category",
    });
    let offset = 0;
    cats.forEach((c, i) => {
      if (!c.tokens) return;
      const length = (around * c.tokens) / whole;
      const arc = svg("circle", {
        cx: size / 2, cy: size / 2, r: radius, fill: "none", stroke: colors[i],
        "stroke-width": 24, "stroke-dasharray": length + " " + (around - length),
        "stroke-dashoffset": -offset, transform: "rotate(-90 80 80)",
      });
      const title = svg("title");
      title.textContent = c.name + " " + fmt(c.tokens);
      arc.append(title);
      art.append(arc);
      offset += length;
    });
    return art;
  }

  // -- request ------------------------------------------------------------------------

  function loadRequest() {
    const node = view.turn;
    const provider = $("provider-select").value;
    showAnswer(
      $("request"),
      "rendering for " + provider + " …",
      "render",
      { session: view.session, node, provider },
      () => view.turn === node && $("provider-select").value === provider,
      requestView
    );
  }

  function requestView(r) {
    const e = r.explain || {};
    const p = e.predicted_cache || {};
    const which = r.for_node
      ? "the request answered by " + r.for_node
      : "the next request at " + view.turn;
    const body = JSON.stringify(r.body, null, 2);
    const shown = el("pre", { class: "text body", text: body.slice(0, BODY_SHOWN) });
    const out = [
      el(
        "div",
        { class: "request-head" },
        el("b", { text: r.provider + " " + r.model }),
        el("span", { class: "muted", text: " · POST " + r.endpoint + " · " + which }),
        el("div", { class: "muted", text: "commit " + r.commit })
      ),
      el(
        "div",
        { class: "totals" },
        el("span", { class: "input-tokens", text: fmt(e.input_tokens) + " prompt tokens (estimate)" }),
        el("span", {
          class: "cache-read",
          text:
            "predicted cache read " + fmt(e.cache_read_tokens) +
            (p.previous_commit ? " (" + Math.round(100 * (p.ratio || 0)) + "%)" : " (no previous request)"),
        }),
        el("span", { text: "cache write " + fmt(e.cache_write_tokens) })
      ),
    ];
    if (e.cache) out.push(el("p", { class: "muted", text: e.cache.rule + ": " + e.cache.reason }));
    if (e.recorded) {
      out.push(
        el("p", {
          class: "recorded",
          text:
            "recorded usage: " + fmt(e.recorded.input_tokens) + " prompt tokens (cache read " +
            fmt(e.recorded.cache_read_tokens) + ", write " + fmt(e.recorded.cache_write_tokens) + ")",
        })
      );
    }
    if (e.breakpoints) {
      out.push(el("p", { class: "muted", text: "breakpoints: " + (e.breakpoints.join(", ") || "none") }));
    }
    out.push(el("h3", { text: "Body (" + fmt(body.length) + " characters)" }), shown);
    if (body.length > BODY_SHOWN) {
      out.push(
        el("button", {
          type: "button",
          text: "show all",
          onclick: (event) => {
            shown.textContent = body;
            event.target.remove();
          },
        })
      );
    }
    return out;
  }

  // -- session ------------------------------------------------------------------------

  async function refreshGraph() {
    forget("graph");
    try {
      const g = await ask("graph", { session: view.session });
      if (g.session.id !== view.session) return;
      setGraph(g);
    } catch (err) {
      // the graph shown stays; a refresh only updates the commit dots
    }
  }

  function setGraph(g) {
    view.graph = g;
    view.byId = new Map(g.nodes.map((n) => [n.id, n]));
    view.forksAt = new Map();
    for (const f of g.forks) {
      if (!view.forksAt.has(f.node)) view.forksAt.set(f.node, []);
      view.forksAt.get(f.node).push(f.session);
    }
    const c = g.counts;
    $("counts").textContent =
      c.nodes + " nodes · " + c.conversation + " turns · " + c.tool_calls + " tool calls · " +
      c.on_branch + " on the branch to HEAD · " + c.commits + " commits stored";
    renderGraph();
  }

  async function loadSession(id) {
    view.session = id;
    view.choice.clear();
    view.turn = view.node = view.timeline = view.commit = null;
    $("session-select").value = id;
    if (!EXPORT && location.hash !== "#session=" + encodeURIComponent(id)) {
      history.replaceState(null, "", "#session=" + encodeURIComponent(id));
    }
    for (const box of ["graph", "node-detail", "timeline", "commit", "diff", "usage", "request"]) {
      $(box).replaceChildren();
    }
    try {
      const g = await ask("graph", { session: id });
      if (view.session !== id) return;
      const s = g.session;
      $("session-title").textContent = s.title || "";
      $("session-title").title = s.title || "";
      const meta = [s.source || "", s.model ? "model " + s.model : ""];
      if (s.base_session) meta.push("forked from " + s.base_session + " at " + s.base_node);
      for (const m of g.merged) {
        meta.push("merged: " + m.head + " into " + m.into + " at " + m.node);
      }
      $("graph-meta").textContent = meta.filter(Boolean).join(" · ");
      setGraph(g);
      const head = g.head && view.byId.get(g.head);
      if (head) select(head);
    } catch (err) {
      showError($("graph"), err);
    }
  }

  function showTab(name) {
    view.tab = name;
    for (const button of document.querySelectorAll("#tabs button")) {
      button.classList.toggle("active", button.dataset.tab === name);
    }
    for (const tab of document.querySelectorAll(".tab")) tab.hidden = tab.id !== "tab-" + name;
    if (!view.turn) return;
    if (name === "usage") loadUsage();
    if (name === "request") loadRequest();
  }

  async function start() {
    $("mode").textContent = EXPORT ? "exported file" : "local server";
    for (const button of document.querySelectorAll("#tabs button")) {
      button.addEventListener("click", () => showTab(button.dataset.tab));
    }
    $("diff-go").addEventListener("click", loadDiff);
    $("provider-select").addEventListener("change", () => view.turn && loadRequest());
    $("session-select").addEventListener("change", (event) => loadSession(event.target.value));
    window.addEventListener("hashchange", () => {
      const id = new URLSearchParams(location.hash.slice(1)).get("session");
      if (!EXPORT && id && id !== view.session) loadSession(id);
    });
    try {
      const config = await ask("config");
      view.providers = config.providers;
      fill(
        $("provider-select"),
        ...config.providers.map((p) => el("option", { value: p, text: p }))
      );
      const sessions = await ask("sessions");
      fill(
        $("session-select"),
        el("option", { value: "", text: "choose a session" }),
        ...sessions.map((s) =>
          el("option", { value: s.id, text: s.id + (s.title ? "  " + cut(s.title, 60) : "") })
        )
      );
      const hash = new URLSearchParams(location.hash.slice(1)).get("session");
      const first =
        (EXPORT ? EXPORT.session : hash || config.session) ||
        (sessions.length === 1 ? sessions[0].id : null);
      if (first) await loadSession(first);
      else fill($("graph"), el("p", { text: "choose a session above" }));
    } catch (err) {
      showError($("graph"), err);
    }
  }

  window.ctxrulesView = { view, ask, requestKey };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
