// The runs table. Compare is enabled with two to six runs ticked; the header box ticks them all.
// Live (console/group_consumers.py, ws/runs/): each run's row follows its status, steps, duration,
// the metric columns (latest, and best when the new value beats it) and its warnings as they are
// recorded; a run launched meanwhile is announced above the table (its place depends on the
// filters and the sort: a reload shows it). After a dropped connection the rows are read again
// from GET /api/runs/ with the page's own query. Every value is written as text.
import { liveSocket } from "./lib/live.js";

(function () {
  "use strict";
  const button = document.getElementById("compare-submit");
  if (!button) return;
  const count = document.getElementById("selected-count");
  const picks = () => Array.from(document.querySelectorAll("input.run-pick"));

  function update() {
    const n = picks().filter((p) => p.checked).length;
    button.disabled = n < 2 || n > 6;
    count.textContent = n === 0 ? "tick runs to compare them"
      : n > 6 ? `${n} selected: compare six at most` : `${n} selected`;
  }

  document.addEventListener("change", (event) => {
    if (event.target.id === "select-all") picks().forEach((p) => { p.checked = event.target.checked; });
    if (event.target.id === "select-all" || event.target.classList.contains("run-pick")) update();
  });
  update();

  // --- live rows ---------------------------------------------------------------------------
  const table = document.getElementById("runs-table");
  const state = document.getElementById("table-live");
  const newRuns = document.getElementById("new-runs");
  const unseen = new Set();
  const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);

  function durationText(seconds) {
    if (seconds === null || seconds === undefined || seconds === "") return "–";
    seconds = Math.floor(Number(seconds));
    const pad = (n) => String(n).padStart(2, "0");
    if (seconds >= 3600) return `${Math.floor(seconds / 3600)} h ${pad(Math.floor((seconds % 3600) / 60))} m`;
    if (seconds >= 60) return `${Math.floor(seconds / 60)} m ${pad(seconds % 60)} s`;
    return `${seconds} s`;
  }

  const number = (value) => (typeof value === "number" && isFinite(value) ? value.toFixed(3) : "–");

  function setWarnings(row, warnings) {
    const cell = row.querySelector(".run-cell");
    let badge = cell.querySelector(".run-warnings");
    if (!warnings.length) { if (badge) badge.remove(); return; }
    if (!badge) {
      badge = document.createElement("a");
      badge.className = "run-warnings";
      badge.href = `${row.querySelector(".run-cell a").getAttribute("href")}#warnings`;
      const tags = cell.querySelector(".run-tags");
      cell.insertBefore(badge, tags ? tags.nextSibling : cell.querySelector(".run-description"));
    }
    badge.textContent = `⚠ ${warnings.map((w) => w.title).join(" · ")}`;
    badge.title = warnings.map((w) => w.message).join("\n\n");
    row.dataset.warnings = String(warnings.length);
  }

  function setMetric(row, name, value) {
    if (typeof value !== "number" || !isFinite(value)) return;
    for (const cell of row.querySelectorAll("td[data-metric]")) {
      if (cell.dataset.metric !== name) continue;
      if (cell.classList.contains("metric-latest")) {
        cell.textContent = number(value);
      } else {
        const best = cell.dataset.value === "" ? null : Number(cell.dataset.value);
        const better = best === null || (cell.dataset.bestIs === "min" ? value < best : value > best);
        if (better) { cell.dataset.value = String(value); cell.textContent = number(value); }
      }
    }
  }

  // `row`: a run_row event (training.selectors.run_row_event) or an item of GET /api/runs/.
  function apply(data) {
    const row = table.querySelector(`tbody tr[data-run-id="${data.id}"]`);
    if (!row) {
      if (!unseen.has(data.id)) {
        unseen.add(data.id);
        newRuns.hidden = false;
        newRuns.querySelector("b").textContent = String(unseen.size);
      }
      return;
    }
    const status = row.querySelector(".status");
    status.textContent = data.status;
    status.className = `status status-${data.status}`;
    status.title = data.status_reason || "";
    row.dataset.status = data.status;
    row.dataset.started = data.started_at || "";
    row.querySelector(".steps-cell").textContent = `${data.steps_done}/${data.total_steps}`;
    const duration = row.querySelector(".duration-cell");
    duration.dataset.seconds = data.duration_s === null ? "" : String(data.duration_s);
    duration.textContent = durationText(data.duration_s);
    for (const [name, value] of Object.entries(data.metrics || {})) {
      // a live step's value, or the API's {latest, best}
      if (value && typeof value === "object") {
        setMetric(row, name, value.best);
        const latest = Array.from(row.querySelectorAll("td.metric-latest[data-metric]")).find((c) => c.dataset.metric === name);
        if (latest) latest.textContent = number(value.latest);
      } else {
        setMetric(row, name, value);
      }
    }
    setWarnings(row, data.warnings || []);
    row.dataset.updated = String(Number(row.dataset.updated || 0) + 1);
  }

  // Running runs' durations tick every second between events.
  setInterval(() => {
    for (const row of table.querySelectorAll("tbody tr[data-run-id]")) {
      if (TERMINAL.has(row.dataset.status) || !row.dataset.started) continue;
      const started = Date.parse(row.dataset.started);
      if (Number.isNaN(started)) continue;
      row.querySelector(".duration-cell").textContent = durationText((Date.now() - started) / 1000);
    }
  }, 1000);

  async function reread() {
    const query = new URLSearchParams(location.search);
    query.set("page_size", String(table.dataset.limit || 200));
    try {
      const response = await fetch(`/api/runs/?${query}`, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) return;
      const page = await response.json();
      (page.results || []).forEach(apply);
    } catch (failure) {
      if (state) state.textContent = `could not read the runs again: ${failure}`;
    }
  }

  liveSocket("/ws/runs/", {
    onEvent: (event) => { if (event.kind === "run_row") apply(event); },
    onState: (text) => { if (state) state.textContent = text; table.dataset.live = text; },
    onOpen: (again) => { if (again) reread(); },
  });
})();
