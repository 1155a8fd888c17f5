// A repository task's workspace browser, without a full reload per click: a directory, a crumb or
// a file of the tree, and a hunk header of the reference patch, are read from the files API
// (GET /api/tasks/<id>/versions/<n>/files/?path=...&highlight=1) and drawn in place, the address
// kept in step (back and forward work, and a copied address opens the same view without a
// script). A file is drawn with line numbers and highlighting (tasks_library/highlight.py: tokens
// as data, each written as text); #L12 or #L12-L15 marks those lines and scrolls to them.
(function () {
  "use strict";
  const browser = document.getElementById("files-browser");
  if (!browser) return;
  const api = browser.dataset.api;
  const version = browser.dataset.version;
  const view = document.getElementById("files-view");
  const crumbs = document.getElementById("crumbs");
  const state = document.getElementById("files-state");

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined) continue;
      if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }

  const pageUrl = (path, anchor) => `?v=${encodeURIComponent(version)}` +
    (path ? `&path=${encodeURIComponent(path)}` : "") + `#${anchor || "files"}`;
  const link = (text, path) => el("a", { href: pageUrl(path), "data-path": path, text: text });

  function size(bytes) {
    if (bytes < 1024) return `${bytes} bytes`;
    return bytes < 1048576 ? `${(bytes / 1024).toFixed(1)} KB` : `${(bytes / 1048576).toFixed(1)} MB`;
  }

  function drawCrumbs(path) {
    crumbs.replaceChildren(link("/", ""));
    const parts = path ? path.split("/") : [];
    parts.forEach((part, i) => {
      crumbs.append(" ", link(part, parts.slice(0, i + 1).join("/")));
      if (i < parts.length - 1) crumbs.append(" /");
    });
  }

  function drawDir(entry) {
    const body = el("tbody");
    for (const [name, path, count] of entry.dirs) {
      body.append(el("tr", {}, el("td", {}, link(`${name}/`, path)),
        el("td", { class: "muted", text: `${count} file${count === 1 ? "" : "s"}` })));
    }
    for (const [name, path, bytes] of entry.files) {
      body.append(el("tr", {}, el("td", {}, link(name, path)), el("td", { class: "muted", text: size(bytes) })));
    }
    view.replaceChildren(el("table", { class: "grid", id: "file-tree" }, body));
  }

  function drawFile(entry) {
    const facts = el("p", { class: "muted", id: "file-facts", text: size(entry.size) +
      (entry.lines ? ` · ${entry.lines.length} line${entry.lines.length === 1 ? "" : "s"}` : "") +
      (entry.truncated ? " · only the start is shown" : "") });
    if (entry.text === null) {
      view.replaceChildren(facts, el("p", { class: "muted", id: "binary-file", text: "not UTF-8 text: not shown" }));
      return;
    }
    const pre = el("pre", { class: "code code-lines hl", id: "file-view", "data-path": entry.path });
    const frag = document.createDocumentFragment();
    (entry.lines || []).forEach((tokens, i) => {
      const n = String(i + 1);
      const line = el("span", { class: "line", id: `L${n}` },
        el("a", { class: "ln", href: `#L${n}`, "data-n": n, "aria-label": `line ${n}` }));
      for (const [css, text] of tokens) line.append(css ? el("span", { class: css, text: text }) : text);
      frag.append(line, "\n");
    });
    pre.append(frag);
    view.replaceChildren(facts, pre);
  }

  // #L12 or #L12-L15: those lines marked, the first scrolled into view.
  function markLines() {
    view.querySelectorAll(".line.target").forEach((line) => line.classList.remove("target", "target-first", "target-last"));
    const match = /^#L(\d+)(?:-L(\d+))?$/.exec(location.hash);
    if (!match) return;
    const first = Number(match[1]);
    const last = Math.max(first, Number(match[2] || match[1]));
    for (let n = first; n <= last; n++) {
      const line = document.getElementById(`L${n}`);
      if (!line) break;
      line.classList.add("target");
      if (n === first) line.classList.add("target-first");
      if (n === last) line.classList.add("target-last");
    }
    const start = document.getElementById(`L${first}`);
    if (start) start.scrollIntoView({ block: "center" });
    browser.dataset.marked = `${first}-${last}`;
  }

  async function show(path, anchor, push) {
    browser.dataset.loading = "1";
    try {
      const response = await fetch(`${api}?path=${encodeURIComponent(path)}&highlight=1`,
        { credentials: "same-origin", headers: { Accept: "application/json" } });
      const entry = await response.json().catch(() => ({}));
      if (!response.ok) { state.textContent = entry.error || entry.detail || `could not read ${path} (${response.status})`; return; }
      state.textContent = "";
      if (push) history.pushState({ path: path }, "", pageUrl(path, anchor));
      drawCrumbs(entry.path);
      if (entry.kind === "dir") drawDir(entry); else drawFile(entry);
      browser.dataset.path = entry.path;
      browser.dataset.shown = String(Number(browser.dataset.shown || 0) + 1);
      if (anchor && anchor !== "files") markLines();
      else document.getElementById("files").scrollIntoView({ block: "start" });
    } catch (failure) {
      state.textContent = `could not read ${path}: ${failure.message || failure}`;
    } finally {
      delete browser.dataset.loading;
    }
  }

  // a click on a tree, crumb or hunk link loads in place (a modified click opens as links do)
  document.addEventListener("click", (event) => {
    const anchor = event.target.closest("a[data-path]");
    if (!anchor || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
    if (!browser.contains(anchor) && !anchor.closest("#reference-patch")) return;
    event.preventDefault();
    show(anchor.dataset.path, anchor.dataset.anchor || "files", true);
  });
  view.addEventListener("click", (event) => {
    const number = event.target.closest("a.ln");
    if (!number) return;
    event.preventDefault();
    history.replaceState(history.state, "", `${location.search}#L${number.dataset.n}`);
    markLines();
  });
  window.addEventListener("popstate", () => {
    const params = new URLSearchParams(location.search);
    show(params.get("path") || "", location.hash.slice(1), false);
  });
  window.addEventListener("hashchange", markLines);
  history.replaceState({ path: browser.dataset.path || "" }, "", location.href);
  markLines();
  browser.dataset.ready = "1";
})();
