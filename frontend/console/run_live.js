// Live reward charts of one run. The server persists every step before it
// broadcasts it; this client keeps the highest sequence number it has drawn and,
// after any disconnect, reconnects asking for everything after it.
(function () {
  "use strict";
  const heat = document.getElementById("reward-heatmap");
  if (!heat) return;
  const runId = heat.dataset.runId;
  const meanDiv = document.getElementById("reward-mean");
  const timeDiv = document.getElementById("step-time");
  const policyDiv = document.getElementById("policy-stats");
  // The trainer's time split per step (seconds), drawn as stacked bars.
  const PHASES = [["timing/generation_s", "generation"], ["timing/sandbox_s", "sandbox (not overlapped)"],
    ["timing/grading_s", "grading"], ["timing/update_s", "update"]];
  const POLICY = [["policy/entropy", "entropy"], ["loss/kl", "KL (k3)"], ["policy/clip_fraction", "clip fraction"]];
  const live = document.getElementById("live-state");
  const countEl = document.getElementById("step-count");
  const statusEl = document.getElementById("run-status");
  const reasonEl = document.getElementById("status-reason");
  const steps = new Map(); // step -> event
  const evaluations = new Map(); // step -> held-out evaluation event
  const alerts = new Map(); // alert id -> latest alert event
  const SEVERITY_COLOURS = { info: "#2f6fb3", warning: "#c77c02", critical: "#b3261e" };
  let lastSeq = 0;
  let retry = 500;
  let pending = false;

  function draw() {
    pending = false;
    const ordered = [...steps.values()].sort((a, b) => a.step - b.step);
    const x = ordered.map((e) => e.step);
    const bins = ordered.length ? ordered[0].bins : [];
    const centres = bins.slice(0, -1).map((b, i) => ((b + bins[i + 1]) / 2).toFixed(2));
    const counts = centres.map((_, row) => ordered.map((e) => e.histogram[row] || 0));
    // Colour by log(1 + count) so that a few high-reward trajectories stay visible
    // beside a crowded zero bin; the hover shows the real count.
    const z = counts.map((row) => row.map((c) => Math.log1p(c)));
    Plotly.react(heat, [{ type: "heatmap", x: x, y: centres, z: z, customdata: counts, colorscale: "Viridis",
      hovertemplate: "step %{x}<br>reward ≈ %{y}<br>%{customdata} trajectories<extra></extra>",
      colorbar: { title: { text: "log(1+n)" } } }],
      { title: { text: "Reward distribution per step" }, xaxis: { title: { text: "step" } },
        yaxis: { title: { text: "reward (bin centre)" } }, margin: { t: 40, r: 20 } },
      { displayModeBar: false, responsive: true });
    const evals = [...evaluations.values()].sort((a, b) => a.step - b.step);
    const marked = [...alerts.values()].sort((a, b) => a.step - b.step);
    Plotly.react(meanDiv, [
      { type: "scatter", mode: "lines+markers", name: "reward/mean", x: x, y: ordered.map((e) => e.reward_mean) },
      { type: "scatter", mode: "lines", name: "reward/pass_rate", x: x,
        y: ordered.map((e) => (e.metrics || {})["reward/pass_rate"]) },
      { type: "scatter", mode: "lines+markers", name: "held-out reward", x: evals.map((e) => e.step),
        y: evals.map((e) => e.reward_mean), marker: { symbol: "diamond", size: 9 }, line: { dash: "dot" } },
      // One marker per alert at the top of the chart, at the step it was raised; lines below.
      { type: "scatter", mode: "markers", name: "alerts", x: marked.map((a) => a.step),
        y: marked.map(() => 0.98), marker: { symbol: "triangle-down", size: 12,
          color: marked.map((a) => SEVERITY_COLOURS[a.severity] || "#555"),
          opacity: marked.map((a) => (a.acknowledged ? 0.45 : 1)) },
        text: marked.map((a) => `${a.severity}: ${a.detector} on ${a.stream}` +
          (a.last_step !== a.step ? ` (to step ${a.last_step}, ×${a.repeats + 1})` : "")),
        hovertemplate: "step %{x}<br>%{text}<extra></extra>" },
    ], { title: { text: "Mean reward, pass rate and alerts" }, xaxis: { title: { text: "step" } },
         yaxis: { range: [0, 1] }, margin: { t: 40, r: 20 },
         shapes: marked.map((a) => ({ type: "line", xref: "x", yref: "paper", x0: a.step, x1: a.step, y0: 0, y1: 1,
           line: { color: SEVERITY_COLOURS[a.severity] || "#555", width: 1.5, dash: a.acknowledged ? "dot" : "solid" },
           opacity: a.acknowledged ? 0.4 : 0.8 })) },
      { displayModeBar: false, responsive: true });
    meanDiv.dataset.alertMarks = String(marked.length);
    const metric = (name) => ordered.map((e) => (e.metrics || {})[name]);
    Plotly.react(timeDiv, PHASES.map(([key, label]) => ({ type: "bar", name: label, x: x, y: metric(key) })),
      { title: { text: "Time per step (s)" }, barmode: "stack", xaxis: { title: { text: "step" } },
        margin: { t: 40, r: 20 } }, { displayModeBar: false, responsive: true });
    Plotly.react(policyDiv, POLICY.map(([key, label]) => ({ type: "scatter", mode: "lines+markers", name: label,
      x: x, y: metric(key) })), { title: { text: "Policy: entropy, KL to reference, clip fraction" },
      xaxis: { title: { text: "step" } }, margin: { t: 40, r: 20 } }, { displayModeBar: false, responsive: true });
    countEl.textContent = String(ordered.length);
    heat.dataset.steps = String(ordered.length);
  }

  function schedule() {
    if (!pending) { pending = true; requestAnimationFrame(draw); }
  }

  // --- the alert feed: one <li> per alert id, newest first, updated in place -----------------
  const feed = document.getElementById("alert-feed");
  const canAck = feed && feed.dataset.canAck === "1";
  const csrfInput = document.querySelector("#alerts input[name=csrfmiddlewaretoken]");

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function fmt(value) {
    if (typeof value !== "number" || !isFinite(value)) return String(value);
    const abs = Math.abs(value);
    return abs !== 0 && (abs < 0.001 || abs >= 10000) ? value.toExponential(2) : String(Number(value.toFixed(4)));
  }

  function ackForm(alert) {
    const form = el("form", "ack-form");
    form.method = "post";
    form.action = feed.dataset.ackUrl.replace("/alerts/0/", `/alerts/${alert.id}/`);
    const note = el("input");
    note.name = "note";
    note.required = true;
    note.placeholder = "note: what you checked or did (required)";
    note.setAttribute("aria-label", `note acknowledging alert ${alert.id}`);
    const button = el("button", "ack-button", "Acknowledge");
    button.type = "submit";
    const error = el("span", "ack-error");
    form.append(note, button, error);
    form.addEventListener("submit", async (submitted) => {
      submitted.preventDefault();
      error.textContent = "";
      if (!note.value.trim()) { error.textContent = "a note is required"; return; }
      const body = new FormData(form);
      if (csrfInput) body.append("csrfmiddlewaretoken", csrfInput.value);
      button.disabled = true;
      try {
        const response = await fetch(form.action, { method: "POST", body: body, credentials: "same-origin",
          headers: { Accept: "application/json", "X-CSRFToken": csrfInput ? csrfInput.value : "" } });
        const answer = await response.json().catch(() => ({ error: `${response.status} ${response.statusText}` }));
        if (!response.ok) { error.textContent = answer.error || `refused (${response.status})`; return; }
        onEvent(answer); // the broadcast brings the same event to every other viewer
      } catch (failure) {
        error.textContent = `could not reach the console: ${failure}`;
      } finally {
        button.disabled = false;
      }
    });
    return form;
  }

  function renderAlert(alert) {
    if (!feed) return;
    let item = feed.querySelector(`li[data-alert-id="${alert.id}"]`);
    if (!item) {
      item = el("li");
      item.dataset.alertId = String(alert.id);
      item.append(el("div", "alert-body"), el("div", "alert-ack"));
      const later = [...feed.children].find((li) => Number(li.dataset.alertId) < alert.id);
      feed.insertBefore(item, later || null);
    }
    item.className = `alert sev-${alert.severity}` + (alert.acknowledged ? " acknowledged" : "");
    item.dataset.severity = alert.severity;
    item.dataset.repeats = String(alert.repeats);
    item.dataset.acknowledged = alert.acknowledged ? "1" : "0";
    const body = item.querySelector(".alert-body");
    body.replaceChildren();
    const head = el("div", "alert-head");
    head.append(el("span", "sev-badge", alert.severity), " ", el("b", "detector", alert.detector), " on ",
      el("code", "stream", alert.stream), " · ",
      el("span", "steps", alert.last_step !== alert.step ? `steps ${alert.step}–${alert.last_step}` : `step ${alert.step}`));
    if (alert.repeats > 0) head.append(" · ", el("span", "repeats", `repeated ${alert.repeats}×`));
    body.append(head);
    const figures = el("div", "alert-figures");
    figures.append("statistic ", el("b", "statistic", fmt(alert.statistic)), " vs threshold ",
      el("b", "threshold", fmt(alert.threshold)), ` · window ${alert.window} step${alert.window === 1 ? "" : "s"}`);
    body.append(figures, el("div", "alert-message", alert.message));
    const ack = item.querySelector(".alert-ack");
    if (alert.acknowledged) {
      ack.replaceChildren();
      const when = alert.acknowledged_at ? new Date(alert.acknowledged_at).toLocaleString() : "";
      ack.append(el("span", "ack-done", `✓ acknowledged by ${alert.acknowledged_by || "?"} ${when}: `),
        el("q", "ack-note", alert.acknowledgement_note));
    } else if (canAck && !ack.querySelector("form")) {
      ack.append(ackForm(alert));
    }
    const all = [...alerts.values()];
    feed.dataset.count = String(all.length);
    document.getElementById("alert-count").textContent = String(all.length);
    document.getElementById("alert-open").textContent = String(all.filter((a) => !a.acknowledged).length);
    const empty = document.getElementById("alert-empty");
    if (empty) empty.hidden = all.length > 0;
  }

  function onEvent(event) {
    if (event.kind === "step") {
      if (!steps.has(event.step)) steps.set(event.step, event);
      lastSeq = Math.max(lastSeq, event.seq);
      schedule();
    } else if (event.kind === "alert") {
      alerts.set(event.id, event);
      renderAlert(event);
      schedule();
    } else if (event.kind === "evaluation") {
      evaluations.set(event.step, event);
      schedule();
    } else if (event.kind === "status") {
      statusEl.textContent = event.status;
      statusEl.className = "status status-" + event.status;
      reasonEl.textContent = event.reason || "";
    }
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/runs/${runId}/?after=${lastSeq}`);
    socket.onopen = () => { live.textContent = "live"; retry = 500; };
    socket.onmessage = (message) => onEvent(JSON.parse(message.data));
    socket.onclose = () => {
      live.textContent = "reconnecting…";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }

  draw();
  connect();
})();
