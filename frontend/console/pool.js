// The sandbox pool panel (run page and /sandboxes/): polls /api/sandboxes/pool/ every few
// seconds and draws one row per runtime. Reads only; a refusal (403) stops the polling.
import { when } from "./lib/time.js";

(function () {
  "use strict";
  const panel = document.getElementById("sandbox-pool");
  if (!panel) return;
  const rows = document.getElementById("pool-rows");
  const state = document.getElementById("pool-state");
  const EVERY_MS = 3000;
  const STATUS_CLASS = { ok: "st-ok", failed: "st-failed", timeout: "st-bad", memory_limit: "st-bad",
    output_limit: "st-bad", crashed: "st-bad", infra_error: "st-infra" };
  let updates = 0;

  function cell(text, className) {
    const td = document.createElement("td");
    if (className) td.className = className;
    td.textContent = text;
    return td;
  }

  function ms(value) {
    if (value === null || value === undefined) return "–";
    return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`;
  }

  function statuses(byKind) {
    const td = document.createElement("td");
    td.className = "pool-statuses";
    const kinds = Object.keys(byKind || {}).sort();
    if (!kinds.length) { td.textContent = "–"; return td; }
    for (const kind of kinds) {
      const line = document.createElement("div");
      const name = document.createElement("code");
      name.textContent = kind;
      line.append(name, " ");
      for (const [status, count] of Object.entries(byKind[kind]).sort((a, b) => b[1] - a[1])) {
        const badge = document.createElement("span");
        badge.className = `pool-status ${STATUS_CLASS[status] || ""}`;
        badge.dataset.status = status;
        badge.textContent = `${status} ${count}`;
        line.append(badge, " ");
      }
      td.append(line);
    }
    return td;
  }

  function demandCell(demand) {
    const td = cell(demand ? String(demand.total) : "–", "pool-demand");
    const trainers = Object.entries((demand && demand.trainers) || {}).sort();
    if (trainers.length) {
      const phases = document.createElement("div");
      phases.className = "meta pool-phases";
      phases.textContent = trainers.map(([name, t]) => `${name}: ${t.phase} ${t.demand}`).join(" · ");
      td.append(phases);
    }
    return td;
  }

  function autoscalerCell(state) {
    if (!state) return cell("fixed pool", "pool-autoscaler meta");
    const text = `${state.workers} of ${state.min_workers}–${state.max_workers} workers × ${state.slots_per_worker}` +
      ` slots, target ${state.target}` + (state.draining ? `, ${state.draining} draining` : "");
    const td = cell(text, "pool-autoscaler");
    td.dataset.workers = String(state.workers);
    td.dataset.target = String(state.target);
    return td;
  }

  function render(data) {
    const names = Object.keys(data.runtimes || {}).sort();
    rows.replaceChildren();
    for (const name of names) {
      const r = data.runtimes[name];
      const tr = document.createElement("tr");
      tr.dataset.runtime = name;
      tr.append(cell(name, "pool-runtime"), cell(String(r.workers.busy), "pool-busy"),
        cell(String(r.workers.idle), "pool-idle"), cell(String(r.workers.dead), r.workers.dead ? "pool-dead warn" : "pool-dead"),
        cell(String(r.queue_depth), r.queue_depth > 4 * Math.max(1, r.workers.alive) ? "pool-depth warn" : "pool-depth"),
        cell(String(r.in_flight), "pool-inflight"), demandCell(r.demand), autoscalerCell(r.autoscaler),
        cell(ms(r.latency_ms.p50), "pool-p50"),
        cell(ms(r.latency_ms.p99), "pool-p99"), cell(String(r.recent), "pool-recent"), statuses(r.statuses));
      // serving, unused (nothing asks for this runtime: grey) or starved (work waits, no worker: red)
      const state = r.state || (r.workers.alive ? "serving" : "starved");
      tr.dataset.state = state;
      tr.classList.add(`state-${state}`);
      rows.append(tr);
    }
    updates += 1;
    panel.dataset.updates = String(updates);
    state.textContent = `updated ${when(data.at)}`;
  }

  async function poll() {
    if (document.hidden) { setTimeout(poll, EVERY_MS); return; }
    try {
      const response = await fetch(panel.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      const data = await response.json().catch(() => ({}));
      if (response.status === 403) { state.textContent = "sign in to see the sandbox pool"; return; }
      if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
      render(data);
    } catch (failure) {
      state.textContent = `could not read the pool: ${failure.message || failure}`;
    }
    setTimeout(poll, EVERY_MS);
  }

  poll();
})();
