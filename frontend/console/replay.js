// Trajectory replay. The server renders the header, the turn index and one empty
// section per turn; this script fills a section when it nears the viewport
// (IntersectionObserver), fetching its turns in chunks from the JSON API (the first
// chunk comes embedded in the page). So a trajectory of thousands of turns opens at
// once and only what is looked at is ever drawn. Long texts are cut in the DOM with a
// "show all" button. Keys: j/k or arrows (next/previous turn), g/G (first/last turn),
// n/p (next/previous trajectory of the group; not when embedded in the labelling page, whose
// own keys they are); #turn-N in the address selects turn N. Each selection is announced as a
// "crucible:turn-select" event ({number, how}), which the labelling page listens to.
(function () {
  "use strict";
  const root = document.getElementById("turns");
  if (!root) return;
  const api = root.dataset.api;
  const count = Number(root.dataset.count);
  const chunkSize = Number(root.dataset.chunk) || 25;
  const sections = Array.from(root.querySelectorAll("section.turn"));
  const cells = Array.from(document.querySelectorAll("#turn-index .cell[data-pos]"));
  const data = new Map(); // position -> turn
  const loading = new Map(); // chunk number -> promise
  let selected = -1;
  let pinUntil = 0; // keep the selected turn at the top while turns above it grow

  const first = JSON.parse(document.getElementById("first-chunk").textContent);
  first.results.forEach((turn, i) => data.set(first.offset + i, turn));
  first.results.forEach((_, i) => loading.set(Math.floor((first.offset + i) / chunkSize), Promise.resolve()));

  // --- DOM helpers ----------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = value;
      else if (key === "open") node.open = true;
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function lineCount(text) {
    if (!text) return 0;
    let n = 1;
    for (let i = text.indexOf("\n"); i !== -1 && i < text.length - 1; i = text.indexOf("\n", i + 1)) n++;
    return n;
  }

  function bytes(n) {
    if (n === null || n === undefined) return "—";
    const units = ["B", "KiB", "MiB", "GiB"];
    let u = 0;
    while (n >= 1024 && u < units.length - 1) { n /= 1024; u++; }
    return (u ? n.toFixed(1) : String(n)) + " " + units[u];
  }

  function ms(n) {
    if (n === null || n === undefined) return "—";
    return n >= 1000 ? (n / 1000).toFixed(2) + " s" : Math.round(n) + " ms";
  }

  // A <pre> holding at most maxLines lines / maxChars characters of text, with a
  // button that puts the rest in.
  function longText(text, cls, maxLines, maxChars) {
    maxLines = maxLines || 40;
    maxChars = maxChars || 4000;
    const pre = el("pre", { class: cls || "text" });
    if (!text) { pre.classList.add("empty"); pre.textContent = "(empty)"; return pre; }
    const lines = text.split("\n");
    if (lines.length <= maxLines && text.length <= maxChars) { pre.textContent = text; return pre; }
    let head = lines.slice(0, maxLines).join("\n");
    if (head.length > maxChars) head = head.slice(0, maxChars);
    pre.textContent = head;
    const hidden = text.length - head.length;
    const more = el("button", { type: "button", class: "show-all",
      text: `show all (${lines.length} lines, ${hidden} more characters)` });
    more.addEventListener("click", () => { pre.textContent = text; more.remove(); });
    const wrap = el("div", { class: "long" }, pre, more);
    return wrap;
  }

  // stdout / stderr: a collapsible block, collapsed when long.
  function stream(name, text, truncated) {
    const lines = lineCount(text);
    const long = lines > 15 || (text || "").length > 1500;
    const summary = el("summary", {}, el("b", { text: name }),
      ` · ${text ? lines + " line" + (lines === 1 ? "" : "s") + ", " + bytes(new Blob([text]).size) : "empty"}`,
      truncated ? el("span", { class: "badge warn", text: "truncated by the sandbox" }) : null);
    const details = el("details", { class: "stream stream-" + name, open: Boolean(text) && !long }, summary);
    if (text) details.append(longText(text, "text", 200, 20000));
    return details;
  }

  // A unified diff's text as [kind, line] rows (training/replay.py's unified_diff_rows).
  function diffRows(text) {
    return (text || "").split("\n").filter((line, i, all) => line || i < all.length - 1).map((line) => [
      /^(--- |\+\+\+ |diff |Binary )/.test(line) ? "head" : line.startsWith("@@") ? "hunk"
        : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx", line]);
  }

  // A repository task's workspace on its task page (the trajectory page gives its address): a
  // hunk of a diff links to its file there, at the hunk's first line in the task's files.
  const workspace = root.dataset.workspace || "";
  function hunkLink(line, path) {
    const match = /^@@ -(\d+)(?:,(\d+))?/.exec(line);
    if (!workspace || !path || !match) return null;
    const first = Math.max(1, Number(match[1]));
    const last = first + Math.max(1, Number(match[2] || 1)) - 1;
    const lines = last > first ? `L${first}-L${last}` : `L${first}`;
    return el("a", { class: "d-hunk hunk-link", href: `${workspace}&path=${encodeURIComponent(path)}#${lines}`,
      title: `open ${path} at ${lines} in the task's workspace`, text: line + "\n" });
  }

  function diffBlock(diff) {
    const pre = el("pre", { class: "diff" });
    const LIMIT = 400;
    let path = "";
    const put = (rows) => {
      const frag = document.createDocumentFragment();
      for (const [kind, line] of rows) {
        if (kind === "head" && /^(\+\+\+ b\/|--- a\/)/.test(line)) path = line.slice(6).trim();
        frag.append((kind === "hunk" && hunkLink(line, path)) || el("span", { class: "d-" + kind, text: line + "\n" }));
      }
      pre.append(frag);
    };
    put(diff.slice(0, LIMIT));
    if (diff.length <= LIMIT) return pre;
    const more = el("button", { type: "button", class: "show-all", text: `show all (${diff.length} diff lines)` });
    more.addEventListener("click", () => { put(diff.slice(LIMIT)); more.remove(); });
    return el("div", { class: "long" }, pre, more);
  }

  function testsTable(tests) {
    const passed = tests.filter((t) => t.passed).length;
    const body = el("tbody");
    for (const t of tests) {
      body.append(el("tr", { class: t.passed ? "pass" : "fail" },
        el("td", { class: "test-id", text: t.id }),
        el("td", {}, el("span", { class: "badge " + (t.passed ? "ok" : "bad"), text: t.passed ? "pass" : "fail" })),
        el("td", { class: "num", text: t.score === null || t.score === undefined ? "" : Number(t.score).toFixed(2) }),
        el("td", {}, t.error ? longText(t.error, "cell-text", 6, 600) : ""),
        el("td", {}, t.output ? longText(t.output, "cell-text", 6, 600) : "")));
    }
    return el("div", { class: "tests" },
      el("h4", { text: `Tests: ${passed}/${tests.length} passed` }),
      el("table", { class: "grid tests-table" },
        el("thead", {}, el("tr", {}, ...["test", "result", "score", "error", "output"].map((h) => el("th", { text: h })))),
        body));
  }

  function sandbox(turn) {
    const r = turn.sandbox_result || {};
    if (!Object.keys(r).length) return el("p", { class: "none", text: "no sandbox execution" });
    const fact = (name, value, cls) => el("div", { class: cls || null }, el("dt", { text: name }), el("dd", { text: value }));
    const status = r.status || turn.sandbox_status || "";
    const facts = el("dl", { class: "facts small" },
      el("div", {}, el("dt", { text: "status" }), el("dd", { class: "sb sb-" + (status || "none"), text: status || "—" })),
      fact("exit code", r.exit_code === null || r.exit_code === undefined ? "—" : String(r.exit_code)),
      fact("signal", r.signal === null || r.signal === undefined ? "—" : String(r.signal)),
      fact("wall", ms(r.wall_ms)),
      fact("cpu", ms(r.cpu_ms)),
      fact("peak memory", bytes(r.peak_memory_bytes)),
      fact("output", r.truncated ? "truncated" : "complete", r.truncated ? "warn" : null));
    return el("div", { class: "sandbox" }, facts,
      r.detail ? el("p", { class: "detail", text: r.detail }) : null,
      // ``truncated`` says one of the streams hit the cap: mark the streams that have output.
      stream("stdout", r.stdout, Boolean(r.stdout) && Boolean(r.truncated || r.stdout_truncated)),
      stream("stderr", r.stderr, Boolean(r.stderr) && Boolean(r.truncated || r.stderr_truncated)),
      Array.isArray(r.tests) && r.tests.length ? testsTable(r.tests) : el("p", { class: "none", text: "no test results" }));
  }

  // --- a turn's blocks ------------------------------------------------------------------
  // Each block draws one kind of data a turn carries and returns null when the turn has none:
  // a turn is drawn from its data, so a richer turn (the agent's messages, tool calls and their
  // outputs, the workspace's diff per edit) adds a block here without touching the others.
  const block = (title, ...children) => el("div", { class: "block" },
    typeof title === "string" ? el("h3", { text: title }) : title, ...children);

  function policyBlock(turn) {
    return "policy_text" in turn ? block("Policy", longText(turn.policy_text, "text policy", 30, 3000)) : null;
  }

  // An agent's turn: its tool calls (arguments and outputs) and the workspace's diff after its
  // edits, instead of a program and one sandbox execution.
  const isAgent = (turn) => turn.action === "tool_calls";

  const textLines = (text) => (typeof text === "string" ? text.replace(/\n$/, "").split("\n") : []);

  // What a call did, read as an edit or a command rather than as escaped JSON: a str_replace is
  // the diff of its old and new text, an insert and a create their added lines, a view its file
  // and lines, a bash call its command. Null for anything else (its arguments are shown as JSON).
  function callView(call) {
    const a = call.arguments || {};
    if (call.name === "bash" && typeof a.command === "string") {
      return longText(`$ ${a.command}`, "code tool-command", 12, 2000);
    }
    if (call.name !== "file_editor" || typeof a.command !== "string") return null;
    const what = el("div", { class: "edit-path" }, el("code", { text: String(a.path || "?") }),
      el("span", { class: "sub", text: ` ${a.command}` }));
    let rows = null;
    if (a.command === "str_replace") {
      rows = [["hunk", "@@ replaced (the first and only match) @@"],
        ...textLines(a.old_str).map((line) => ["del", `-${line}`]),
        ...textLines(a.new_str).map((line) => ["add", `+${line}`])];
    } else if (a.command === "insert") {
      rows = [["hunk", `@@ inserted after line ${a.insert_line} @@`], ...textLines(a.new_str).map((line) => ["add", `+${line}`])];
    } else if (a.command === "create") {
      rows = [["hunk", "@@ a new file @@"], ...textLines(a.file_text).map((line) => ["add", `+${line}`])];
    } else if (a.command === "view") {
      if (Array.isArray(a.view_range)) what.append(el("span", { class: "sub", text: ` lines ${a.view_range.join("–")}` }));
      return what;
    } else if (a.command === "undo_edit") {
      return what;
    }
    return rows ? el("div", { class: "edit" }, what, diffBlock(rows)) : null;
  }

  function toolCall(call) {
    const args = JSON.stringify(call.arguments || {}, null, 1);
    const head = el("summary", {}, el("b", { text: call.name || "parse error" }),
      call.call_id ? el("span", { class: "sub", text: ` ${call.call_id} · ${ms((call.seconds || 0) * 1000)}` }) : null,
      call.error ? el("span", { class: "badge bad", text: "error" }) : el("span", { class: "badge ok", text: "ok" }));
    const view = call.name ? callView(call) : null;
    const noArguments = !Object.keys(call.arguments || {}).length;
    return el("details", { class: "tool-call", open: true }, head,
      view,
      !call.name || noArguments ? null : view ? el("details", { class: "tool-json" },
        el("summary", { text: "arguments as sent" }), longText(args, "code tool-args", 12, 1500))
        : longText(args, "code tool-args", 12, 1500),
      longText(call.output, "text tool-output", 20, 3000),
      call.diff ? el("details", { class: "tool-diff" }, el("summary", { text: "workspace diff after this call" }),
        diffBlock(diffRows(call.diff))) : null);
  }

  function toolCallsBlock(turn) {
    const r = turn.sandbox_result || {};
    const calls = r.tool_calls || [];
    if (!calls.length && !(r.parse_errors || []).length) {
      return block("Tool calls", el("p", { class: "none", text: "no tool call in this turn" }));
    }
    return block(`Tool calls (${calls.length})`, ...calls.map(toolCall),
      r.stopped === false ? el("p", { class: "warn", text: "the turn hit its token budget" }) : null);
  }

  function codeBlock(turn, pos) {
    if (!("code" in turn)) return null;
    if (isAgent(turn)) {
      return turn.diff && turn.diff.length
        ? block("Workspace diff after this turn", diffBlock(turn.diff)) : null;
    }
    if (pos === 0 || !Array.isArray(turn.diff)) return block("Code", longText(turn.code, "code", 80, 8000));
    return block(el("h3", {}, "Code ", el("span", { class: "sub",
      text: turn.diff.length ? `diff from turn ${pos}` : `unchanged from turn ${pos}` })),
      turn.diff.length ? diffBlock(turn.diff) : null,
      el("details", { class: "full-code" }, el("summary", { text: `full code (${lineCount(turn.code)} lines)` }),
        longText(turn.code, "code", 200, 20000)));
  }

  function sandboxBlock(turn) {
    if (isAgent(turn)) return toolCallsBlock(turn);
    return "sandbox_result" in turn ? block("Sandbox", sandbox(turn)) : null;
  }

  function observationBlock(turn) {
    return "observation" in turn && !isAgent(turn)
      ? block("Observation shown to the policy", longText(turn.observation, "text observation", 30, 3000)) : null;
  }

  // The turn's two columns: what the policy did, and what the environment answered.
  const COLUMNS = [[policyBlock, codeBlock], [sandboxBlock, observationBlock]];

  function renderTurn(pos) {
    const section = sections[pos];
    if (!section || section.dataset.rendered) return;
    const turn = data.get(pos);
    if (!turn) return;
    const body = section.querySelector(".turn-body");
    const tokens = section.querySelector("h2 .tokens") ||
      section.querySelector("h2").appendChild(el("span", { class: "tokens" }));
    if (turn.sampled_tokens !== null && turn.sampled_tokens !== undefined) {
      tokens.textContent = `${turn.sampled_tokens} sampled tokens · ${turn.observation_tokens || 0} observation tokens`;
    }
    const content = el("div", { class: "turn-grid" },
      ...COLUMNS.map((blocks) => el("div", { class: "col" }, ...blocks.map((draw) => draw(turn, pos)))));
    body.replaceChildren(content);
    section.dataset.rendered = "1";
    if (selected >= 0 && performance.now() < pinUntil) sections[selected].scrollIntoView({ block: "start" });
  }

  function load(chunk) {
    if (loading.has(chunk)) return loading.get(chunk);
    const url = `${api}?offset=${chunk * chunkSize}&limit=${chunkSize}`;
    const promise = fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((response) => {
        if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
        return response.json();
      })
      .then((page) => page.results.forEach((turn, i) => data.set(chunk * chunkSize + i, turn)));
    loading.set(chunk, promise);
    promise.catch(() => loading.delete(chunk)); // the next sighting retries
    return promise;
  }

  function ensure(pos) {
    if (sections[pos].dataset.rendered) return;
    if (data.has(pos)) { renderTurn(pos); return; }
    load(Math.floor(pos / chunkSize)).then(() => renderTurn(pos), (error) => {
      sections[pos].querySelector(".turn-body").replaceChildren(
        el("p", { class: "error", text: `could not load this turn: ${error.message}` }));
    });
  }

  const observer = new IntersectionObserver((entries) => {
    for (const entry of entries) if (entry.isIntersecting) ensure(Number(entry.target.dataset.pos));
  }, { rootMargin: "800px 0px" });
  sections.forEach((s) => observer.observe(s));

  // --- selection and keys -----------------------------------------------------------
  // The first section whose bottom is below the top of the viewport (binary search:
  // sections are in document order).
  function topVisible() {
    let lo = 0;
    let hi = sections.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (sections[mid].getBoundingClientRect().bottom <= 1) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  function inView(pos) {
    const rect = sections[pos].getBoundingClientRect();
    return rect.bottom > 0 && rect.top < window.innerHeight;
  }

  // `how` says what chose the turn ("click": the reader clicked it or its index cell; "key";
  // "address"); the labelling page takes a clicked turn as its label's "at turn".
  function select(pos, scroll, how) {
    if (!sections.length) return;
    pos = Math.max(0, Math.min(sections.length - 1, pos));
    if (selected >= 0) {
      sections[selected].classList.remove("selected");
      if (cells[selected]) cells[selected].classList.remove("selected");
    }
    selected = pos;
    sections[pos].classList.add("selected");
    if (cells[pos]) {
      cells[pos].classList.add("selected");
      cells[pos].scrollIntoView({ block: "nearest" });
    }
    const hash = "#turn-" + (pos + 1);
    if (location.hash !== hash) history.replaceState(null, "", hash);
    if (scroll !== false) {
      pinUntil = performance.now() + 1500;
      sections[pos].scrollIntoView({ block: "start" });
    }
    ensure(pos);
    document.dispatchEvent(new CustomEvent("crucible:turn-select",
      { detail: { number: pos + 1, how: how || "key" } }));
  }

  function move(delta) {
    if (!sections.length) return;
    if (selected >= 0 && inView(selected)) select(selected + delta);
    else select(topVisible());
  }

  function fromHash() {
    const match = /^#turn-(\d+)$/.exec(location.hash);
    if (match) select(Number(match[1]) - 1, true, "address");
  }

  ["wheel", "touchstart", "mousedown"].forEach((name) =>
    window.addEventListener(name, () => { pinUntil = 0; }, { passive: true }));
  window.addEventListener("hashchange", fromHash);
  root.addEventListener("click", (event) => {
    const section = event.target.closest("section.turn");
    if (section && !event.target.closest("a, button, summary")) select(Number(section.dataset.pos), false, "click");
  });
  cells.forEach((cell) => cell.addEventListener("click", (event) => {
    event.preventDefault(); // selected here, the address kept in step by select()
    select(Number(cell.dataset.pos), true, "click");
  }));

  // Embedded in the labelling page, the replay keeps j/k/g/G; n and p are the page's own.
  const embedded = root.dataset.embedded === "1";
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target.closest && event.target.closest("input, textarea, select, [contenteditable]")) return;
    const go = (url) => { if (url) location.assign(url); };
    switch (event.key) {
      case "j": case "ArrowDown": move(1); break;
      case "k": case "ArrowUp": move(-1); break;
      case "g": case "Home": select(0); break;
      case "G": case "End": select(count - 1); break;
      case "n": if (embedded) return; go(root.dataset.next); break;
      case "p": if (embedded) return; go(root.dataset.prev); break;
      default: return;
    }
    event.preventDefault();
  });

  if (location.hash) fromHash();
  document.body.dataset.replayReady = "1";
})();
