// A background job followed on its page without a reload: polls the job's status API (every
// second while queued or running), draws its progress by stage, then each version's verdict,
// and updates the page's own verdict badges in place (the task page's header, the task list's
// rows). Stops when the job is done or failed.
(function () {
  "use strict";
  const panel = document.getElementById("job-panel");
  if (!panel) return;
  const statusEl = document.getElementById("job-status");
  const bar = document.getElementById("job-progress");
  const stageEl = document.getElementById("job-stage");
  const errorEl = document.getElementById("job-error");
  const table = document.getElementById("job-results");
  const EVERY_MS = 1000;

  function cell(text, className) {
    const td = document.createElement("td");
    if (className) td.className = className;
    td.textContent = text;
    return td;
  }

  function badge(verdict) {
    const span = document.createElement("span");
    span.className = `badge verdict-${verdict}`;
    span.textContent = verdict;
    return span;
  }

  function showResults(results) {
    const body = table.querySelector("tbody");
    body.replaceChildren();
    for (const r of results) {
      const tr = document.createElement("tr");
      tr.dataset.versionId = String(r.id);
      const link = document.createElement("a");
      link.href = `${panel.dataset.taskBase}${r.task_id.split("/").map(encodeURIComponent).join("/")}/?v=${r.number}`;
      link.textContent = `${r.task_id} v${r.number}`;
      const name = document.createElement("td");
      name.append(link);
      const verdict = document.createElement("td");
      verdict.append(badge(r.verdict));
      tr.append(name, verdict, cell(r.quarantined ? "quarantined" : "–", r.quarantined ? "job-quarantined" : ""),
        cell(r.mutation_score === null || r.mutation_score === undefined ? "–" : Number(r.mutation_score).toFixed(2)),
        cell((r.reasons || []).join("; ") || "–"));
      body.append(tr);
      // the page's own badges and figures of this version
      for (const node of document.querySelectorAll(`[data-verdict-of="${r.id}"]`)) {
        node.className = `badge verdict-${r.verdict}`;
        node.textContent = r.verdict;
      }
      for (const node of document.querySelectorAll(`[data-mutation-of="${r.id}"]`)) {
        node.textContent = r.mutation_score === null || r.mutation_score === undefined ? "–" : Number(r.mutation_score).toFixed(2);
      }
      const header = document.querySelector(`#verdict[data-verdict-of="${r.id}"]`);
      const quarantined = document.getElementById("quarantined");
      if (header && quarantined) quarantined.hidden = !r.quarantined;
      const when = document.querySelector(`#validated-when[data-version-id="${r.id}"]`);
      if (when) {
        const reload = document.createElement("a");
        reload.href = location.pathname + location.search;
        reload.textContent = "reload for the new report";
        when.replaceChildren(`validated just now (job shown above): the evidence below is from before; `, reload);
      }
    }
    table.hidden = !results.length;
  }

  function render(job) {
    panel.dataset.status = job.status;
    statusEl.textContent = job.status;
    statusEl.className = `badge job-${job.status}`;
    bar.max = job.stages_total || 5;
    bar.value = job.status === "done" ? bar.max : job.stages_done;
    stageEl.textContent = job.status === "queued" ? "waiting for a validation worker…"
      : job.status === "running" ? `${job.stage} (${job.stages_done} of ${job.stages_total} stages done)`
        : job.status === "done" ? `done: ${job.results.length} version${job.results.length === 1 ? "" : "s"} validated`
          : "failed";
    errorEl.hidden = !job.error;
    errorEl.textContent = job.error || "";
    if (job.status === "done") showResults(job.results || []);
  }

  async function poll() {
    try {
      const response = await fetch(panel.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
      const job = await response.json();
      render(job);
      if (job.status === "done" || job.status === "failed") return;
    } catch (failure) {
      stageEl.textContent = `could not read the job: ${failure.message || failure}`;
    }
    setTimeout(poll, EVERY_MS);
  }

  const initial = document.getElementById("job-results-data");
  if (initial && panel.dataset.status === "done") showResults(JSON.parse(initial.textContent));
  if (panel.dataset.status !== "done" && panel.dataset.status !== "failed") poll();
})();
