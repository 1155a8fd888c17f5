// Live reward charts of one run. The server persists every step before it
// broadcasts it; this client keeps the highest sequence number it has drawn and,
// after any disconnect, reconnects asking for everything after it. A long run's
// back-fill sends its newest steps in full (with per-component histograms) and older
// ones as buckets of consecutive steps (``span`` > 1, ``decimated``): those are drawn
// at their last step, their histogram summed and their metrics averaged.
// An ES module: `npm run build` bundles plotly.js from npm into it; unbundled, the page's
// import map points the name at the plotly wheel's copy (console/frontend.py).
import Plotly from "plotly.js-dist-min";

import { emptyFrame, stepAxis } from "./lib/axes.js";
import { CHART_CONFIG, runPage } from "./lib/run_page.js";
import { timeElement } from "./lib/time.js";

(function () {
  "use strict";
  const page = runPage();
  if (!page) return;
  const { heat, runId, totalSteps } = page;
  // What the run's reward is: correctness alone, or a weighted total of components. A series
  // says which (a total with a quality share is not plotted as if it were correctness).
  const weightsNode = document.getElementById("reward-weights");
  const weights = (weightsNode && JSON.parse(weightsNode.textContent)) || { correctness: 1 };
  // correctness first, then by name (a JSON column keeps no key order)
  const weighted = Object.entries(weights).filter(([, w]) => Number(w) > 0)
    .sort(([a], [b]) => (a === "correctness" ? -1 : b === "correctness" ? 1 : a.localeCompare(b)));
  const correctnessOnly = weighted.length === 1 && weighted[0][0] === "correctness";
  const rewardName = correctnessOnly ? "reward (correctness)"
    : `total reward (${weighted.map(([name, w]) => `${name}×${w}`).join(" + ")}) / ${weighted.reduce((sum, [, w]) => sum + Number(w), 0)}`;
  const meanTitle = correctnessOnly ? "Mean reward, pass rate, held-out pass@1 and alerts"
    : "Mean total reward, correctness, pass rate, held-out pass@1";
  const meanDiv = document.getElementById("reward-mean");
  const timeDiv = document.getElementById("step-time");
  const policyDiv = document.getElementById("policy-stats");
  const lossDiv = document.getElementById("loss-policy");
  const flagDiv = document.getElementById("flag-rate");
  const tokensDiv = document.getElementById("tokens-rate");
  const backfillNote = document.getElementById("backfill-note");
  const CONFIG = CHART_CONFIG;
  // The trainer's time split per step (seconds), drawn as stacked bars.
  const PHASES = [["timing/generation_s", "generation"], ["timing/sandbox_s", "sandbox (not overlapped)"],
    ["timing/grading_s", "grading"], ["timing/update_s", "update"],
    ["timing/weight_gather_s", "weight gather (FSDP2)"]];
  const POLICY = [["policy/entropy", "entropy"], ["loss/kl", "KL (k3)"], ["policy/clip_fraction", "clip fraction"]];
  const live = document.getElementById("live-state");
  const countEl = document.getElementById("step-count");
  const statusEl = document.getElementById("run-status");
  const reasonEl = document.getElementById("status-reason");
  const steps = new Map(); // step -> event
  const evaluations = new Map(); // step -> held-out evaluation event
  const alerts = new Map(); // alert id -> latest alert event
  const componentNames = new Set(); // reward components seen in step events
  const fetchedComponents = new Map(); // "first-last" -> {component: counts} read from the API
  const SEVERITY_COLOURS = { info: "#2f6fb3", warning: "#c77c02", critical: "#b3261e" };
  let lastSeq = 0;
  let retry = 500;
  let pending = false;

  function draw() {
    pending = false;
    const ordered = [...steps.values()].sort((a, b) => a.step - b.step);
    const x = ordered.map((e) => e.step);
    const empty = !ordered.length;
    // every chart's layout: its title, whole-number step ticks, a frame and a note while empty
    const frame = (title, more) => {
      const { yaxis, xaxis, ...rest } = more || {};
      return { title: { text: title }, xaxis: stepAxis(x, totalSteps, xaxis), margin: { t: 40, r: 20 },
        ...emptyFrame(empty, yaxis), ...rest };
    };
    const bins = ordered.length ? ordered[0].bins : [];
    const centres = bins.slice(0, -1).map((b, i) => ((b + bins[i + 1]) / 2).toFixed(2));
    const counts = centres.map((_, row) => ordered.map((e) => e.histogram[row] || 0));
    // Colour by log(1 + count) so that a few high-reward trajectories stay visible
    // beside a crowded zero bin; the hover shows the real count. A bucket of older steps
    // (a decimated back-fill) is coloured by its count per step.
    const z = counts.map((row) => row.map((c, i) => Math.log1p(c / (ordered[i].span || 1))));
    const spanText = ordered.map((e) => (e.span > 1 ? `steps ${e.first_step}–${e.step}` : `step ${e.step}`));
    Plotly.react(heat, [{ type: "heatmap", x: x, y: centres, z: z, customdata: counts, colorscale: "Viridis",
      text: centres.map(() => spanText),
      hovertemplate: "%{text}<br>reward ≈ %{y}<br>%{customdata} trajectories<extra></extra>",
      colorbar: { title: { text: "log(1+n)" } } }],
      frame(`Distribution of the ${correctnessOnly ? "reward (correctness)" : "total reward"} per step`,
        { yaxis: { title: { text: `${correctnessOnly ? "reward" : "total reward"} (bin centre)` } } }), CONFIG);
    const evals = [...evaluations.values()].sort((a, b) => a.step - b.step);
    const marked = [...alerts.values()].sort((a, b) => a.step - b.step);
    Plotly.react(meanDiv, [
      { type: "scatter", mode: "lines+markers", name: rewardName, x: x, y: ordered.map((e) => e.reward_mean) },
      ...(correctnessOnly ? [] : [{ type: "scatter", mode: "lines", name: "correctness (mean)", x: x,
        y: ordered.map((e) => (e.metrics || {})["reward/correctness"]), line: { dash: "dashdot" } }]),
      { type: "scatter", mode: "lines", name: "pass rate (all hidden tests)", x: x,
        y: ordered.map((e) => (e.metrics || {})["reward/pass_rate"]) },
      { type: "scatter", mode: "lines+markers", name: "held-out reward", x: evals.map((e) => e.step),
        y: evals.map((e) => e.reward_mean), marker: { symbol: "diamond", size: 9 }, line: { dash: "dot" } },
      { type: "scatter", mode: "lines+markers", name: "held-out pass@1", x: evals.map((e) => e.step),
        y: evals.map((e) => (e.pass_at_k || {})["1"]), marker: { symbol: "star", size: 10 },
        line: { dash: "dash" } },
      // One marker per alert at the top of the chart, at the step it was raised; lines below.
      { type: "scatter", mode: "markers", name: "alerts", x: marked.map((a) => a.step),
        y: marked.map(() => 0.98), marker: { symbol: "triangle-down", size: 12,
          color: marked.map((a) => SEVERITY_COLOURS[a.severity] || "#555"),
          opacity: marked.map((a) => (a.acknowledged ? 0.45 : 1)) },
        text: marked.map((a) => `${a.severity}: ${a.detector} on ${a.stream}` +
          (a.last_step !== a.step ? ` (to step ${a.last_step}, ×${a.repeats + 1})` : "")),
        hovertemplate: "step %{x}<br>%{text}<extra></extra>" },
    ], frame(meanTitle, { yaxis: { range: [0, 1] }, legend: { orientation: "h", y: -0.3 },
         shapes: marked.map((a) => ({ type: "line", xref: "x", yref: "paper", x0: a.step, x1: a.step, y0: 0, y1: 1,
           line: { color: SEVERITY_COLOURS[a.severity] || "#555", width: 1.5, dash: a.acknowledged ? "dot" : "solid" },
           opacity: a.acknowledged ? 0.4 : 0.8 })) }), CONFIG);
    meanDiv.dataset.alertMarks = String(marked.length);
    const metric = (name) => ordered.map((e) => (e.metrics || {})[name]);
    // a chart whose metrics no step recorded says so in its title
    const noted = (title, series) => (ordered.length && !series.some((ys) => ys.some((v) => typeof v === "number"))
      ? `${title} (not recorded by this run)` : title);
    Plotly.react(timeDiv, PHASES.map(([key, label]) => ({ type: "bar", name: label, x: x, y: metric(key) })),
      frame(noted("Time per step (s)", PHASES.map(([key]) => metric(key))), { barmode: "stack" }), CONFIG);
    Plotly.react(policyDiv, POLICY.map(([key, label]) => ({ type: "scatter", mode: "lines+markers", name: label,
      x: x, y: metric(key) })), frame(noted("Policy: entropy, KL to reference, clip fraction", POLICY.map(([key]) => metric(key)))), CONFIG);
    Plotly.react(lossDiv, [{ type: "scatter", mode: "lines+markers", name: "loss/policy", x: x, y: metric("loss/policy") }],
      frame(noted("Policy loss", [metric("loss/policy")])), CONFIG);
    Plotly.react(flagDiv, [{ type: "scatter", mode: "lines+markers", name: "flags/rate", x: x, y: metric("flags/rate"),
      line: { color: "#b3261e" }, fill: "tozeroy", fillcolor: "rgba(179,38,30,0.12)" }],
      frame(noted("Hack-flag rate (share of trajectories flagged)", [metric("flags/rate")]), { yaxis: { rangemode: "tozero" } }), CONFIG);
    // tokens/generated over the step's time split (generation + sandbox + grading + update)
    const rate = ordered.map((e) => {
      const m = e.metrics || {};
      const seconds = PHASES.reduce((sum, [key]) => sum + (Number(m[key]) || 0), 0);
      return typeof m["tokens/generated"] === "number" && seconds > 0 ? m["tokens/generated"] / seconds : null;
    });
    Plotly.react(tokensDiv, [{ type: "scatter", mode: "lines+markers", name: "tokens/s", x: x, y: rate,
      line: { color: "#2e7d32" } }], frame(noted("Generated tokens per second of step time", [rate]), { yaxis: { rangemode: "tozero" } }), CONFIG);
    const covered = ordered.reduce((sum, e) => sum + (e.span || 1), 0);
    countEl.textContent = String(covered);
    heat.dataset.steps = String(covered);
    heat.dataset.events = String(ordered.length);
    drawDistribution(ordered);
  }

  // --- the reward distribution of recent steps: ridgeline or violins, from binned counts ------
  const distDiv = document.getElementById("reward-dist");
  const distMode = document.getElementById("dist-mode");
  const distComponent = document.getElementById("dist-component");
  const distWindow = document.getElementById("dist-window");
  const slider = document.getElementById("dist-slider");
  const sliderLabel = document.getElementById("dist-step");
  const follow = document.getElementById("dist-follow");
  let lastOrdered = [];

  function stepLabel(e) {
    return e.span > 1 ? `steps ${e.first_step}–${e.step}` : `step ${e.step}`;
  }

  // The counts to draw for an event: the total histogram, or one component's: from the event
  // (the newest steps carry them), else read from the components API for the whole window
  // at once (older steps, and buckets of older steps, summed over their span).
  const SPAN_MAX = 2000; // training.selectors.COMPONENT_SPAN_MAX
  const spanKey = (e) => `${e.first_step || e.step}-${e.step}`;

  function countsOf(e, component) {
    if (!component) return e.histogram;
    if (e.components && e.components[component]) return e.components[component];
    const fetched = fetchedComponents.get(spanKey(e));
    return fetched ? fetched[component] || null : null;
  }

  function fetchComponents(shown) {
    const missing = shown.filter((e) => !e.components && !fetchedComponents.has(spanKey(e)));
    if (!missing.length) return;
    missing.forEach((e) => fetchedComponents.set(spanKey(e), null)); // asked for
    // consecutive chunks of at most SPAN_MAX steps, one request each
    const chunks = [];
    for (const e of missing) {
      const first = e.first_step || e.step;
      const last = chunks[chunks.length - 1];
      if (last && e.step - last.first < SPAN_MAX) { last.last = e.step; last.events.push(e); }
      else chunks.push({ first: first, last: e.step, events: [e] });
    }
    for (const chunk of chunks) {
      const url = `${heat.dataset.componentsUrl}?first=${chunk.first}&last=${chunk.last}`;
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then((r) => (r.ok ? r.json() : Promise.reject(new Error(String(r.status)))))
        .then((data) => {
          for (const e of chunk.events) {
            const summed = {};
            for (let step = e.first_step || e.step; step <= e.step; step++) {
              for (const [name, counts] of Object.entries((data.steps || {})[step] || {})) {
                summed[name] = summed[name] ? summed[name].map((c, i) => c + counts[i]) : counts.slice();
              }
            }
            fetchedComponents.set(spanKey(e), summed);
          }
          drawDistribution(lastOrdered);
        })
        .catch(() => chunk.events.forEach((e) => fetchedComponents.set(spanKey(e), {})));
    }
  }

  function syncComponents() {
    for (const name of [...componentNames].sort()) {
      if (!distComponent.querySelector(`option[value="${CSS.escape(name)}"]`)) {
        const option = document.createElement("option");
        option.value = name;
        option.textContent = name;
        distComponent.append(option);
      }
    }
  }

  function drawDistribution(ordered) {
    lastOrdered = ordered;
    const n = ordered.length;
    const wasAtEnd = Number(slider.value) >= Number(slider.max);
    slider.max = String(Math.max(0, n - 1));
    if (follow.checked || wasAtEnd) slider.value = slider.max;
    if (!n) {
      sliderLabel.textContent = "–";
      Plotly.react(distDiv, [], { title: { text: "Reward distribution of recent steps" }, margin: { t: 40, r: 20 },
        xaxis: { range: [0, 1], title: { text: "reward" } }, yaxis: { visible: false },
        annotations: emptyFrame(true).annotations }, CONFIG);
      return;
    }
    const end = Math.min(Number(slider.value), n - 1);
    const size = Number(distWindow.value) || 10;
    const shown = ordered.slice(Math.max(0, end - size + 1), end + 1);
    const component = distComponent.value;
    const mode = distMode.value;
    if (component) fetchComponents(shown);
    const bins = ordered[0].bins;
    const centres = bins.slice(0, -1).map((b, i) => (b + bins[i + 1]) / 2);
    const rows = shown.map((e) => {
      const counts = countsOf(e, component);
      const total = counts ? counts.reduce((a, b) => a + b, 0) : 0;
      const shares = counts && total ? counts.map((c) => c / total) : null;
      const mean = shares ? shares.reduce((sum, p, i) => sum + p * centres[i], 0) : null;
      return { e: e, counts: counts, total: total, shares: shares, mean: mean };
    });
    const peak = Math.max(1e-9, ...rows.filter((r) => r.shares).map((r) => Math.max(...r.shares)));
    const traces = [];
    const palette = (i) => `hsl(${220 - (140 * i) / Math.max(1, rows.length - 1)}, 62%, 52%)`;
    const hover = (r) => centres.map((c, i) => `${stepLabel(r.e)}<br>${component || "reward"} ${bins[i].toFixed(1)}–` +
      `${bins[i + 1].toFixed(1)}<br>${r.counts[i]} trajectories (${(100 * r.shares[i]).toFixed(0)}%)`);
    if (mode === "violin") {
      rows.forEach((r, i) => {
        if (!r.shares) return;
        const half = r.shares.map((p) => (0.46 * p) / peak);
        const ys = [bins[0], ...centres, bins[bins.length - 1]];
        const ws = [half[0], ...half, half[half.length - 1]];
        traces.push({ type: "scatter", mode: "lines", x: [...ws.map((w) => i + w), ...ws.map((w) => i - w).reverse(), i + ws[0]],
          y: [...ys, ...ys.slice().reverse(), ys[0]], fill: "toself", fillcolor: palette(i), opacity: 0.85,
          line: { color: "#1d2330", width: 1, shape: "spline", smoothing: 0.6 }, hoverinfo: "skip", showlegend: false });
        traces.push({ type: "scatter", mode: "markers", x: centres.map(() => i), y: centres, text: hover(r),
          marker: { size: 14, opacity: 0 }, hovertemplate: "%{text}<extra></extra>", showlegend: false });
      });
      const drawn = rows.map((r, i) => [r, i]).filter(([r]) => r.shares);
      traces.push({ type: "scatter", mode: "markers", name: "mean", x: drawn.map(([, i]) => i),
        y: drawn.map(([r]) => r.mean), text: drawn.map(([r]) => stepLabel(r.e)), showlegend: false,
        marker: { color: "#fff", size: 8, line: { color: "#1d2330", width: 1.5 } },
        hovertemplate: "%{text}<br>mean %{y:.3f}<extra></extra>" });
      Plotly.react(distDiv, traces, {
        title: { text: `Reward distribution: ${component || "total"} (violins)` }, margin: { t: 40, r: 20, b: 70 },
        xaxis: { tickvals: rows.map((_, i) => i), ticktext: rows.map((r) => (r.e.span > 1 ? `${r.e.first_step}–${r.e.step}` : String(r.e.step))),
          title: { text: "step" }, range: [-0.6, Math.max(rows.length - 0.4, 0.6)], zeroline: false },
        yaxis: { title: { text: component || "reward" }, range: [-0.02, 1.02] } }, CONFIG);
    } else {
      // Oldest at the bottom; each ridge in front of the one above it (drawn after it).
      const height = 1.6; // the tallest ridge overlaps the one above
      const labelEvery = Math.ceil(rows.length / 12); // the newest step always labelled
      for (let i = rows.length - 1; i >= 0; i--) {
        const r = rows[i];
        if (!r.shares) continue;
        const ys = r.shares.map((p) => i + (height * p) / peak);
        traces.push({ type: "scatter", mode: "lines", x: [bins[0], ...centres, bins[bins.length - 1]],
          y: [i, ...ys, i], fill: "toself", fillcolor: palette(i), opacity: 0.9,
          line: { color: "#1d2330", width: 1, shape: "spline", smoothing: 0.5 }, hoverinfo: "skip", showlegend: false });
        traces.push({ type: "scatter", mode: "markers", x: centres, y: ys, text: hover(r),
          marker: { size: 10, opacity: 0 }, hovertemplate: "%{text}<extra></extra>", showlegend: false });
      }
      // the means on top of every ridge: a tick on each ridge's baseline
      const drawn = rows.map((r, i) => [r, i]).filter(([r]) => r.shares);
      traces.push({ type: "scatter", mode: "markers", name: "mean", x: drawn.map(([r]) => r.mean),
        y: drawn.map(([, i]) => i), text: drawn.map(([r]) => stepLabel(r.e)), showlegend: false,
        marker: { symbol: "triangle-up", color: "#fff", size: 10, line: { color: "#1d2330", width: 1.5 } },
        hovertemplate: "%{text}<br>mean %{x:.3f}<extra></extra>" });
      Plotly.react(distDiv, traces, {
        title: { text: `Reward distribution: ${component || "total"} (ridgeline)` }, margin: { t: 40, r: 20, l: 90 },
        xaxis: { title: { text: component || "reward" }, range: [0, 1] },
        yaxis: { tickvals: rows.map((_, i) => i).filter((i) => (rows.length - 1 - i) % labelEvery === 0),
          ticktext: rows.map((r) => stepLabel(r.e)).filter((_, i) => (rows.length - 1 - i) % labelEvery === 0),
          zeroline: false, tickfont: { size: 11 },
          range: [-0.3, rows.length - 1 + height + 0.2] } }, CONFIG);
    }
    const missing = rows.filter((r) => !r.shares).length;
    sliderLabel.textContent = stepLabel(shown[shown.length - 1]) + (missing ? ` (${missing} loading)` : "");
    distDiv.dataset.mode = mode;
    distDiv.dataset.component = component;
    distDiv.dataset.last = String(shown[shown.length - 1].step);
    distDiv.dataset.first = String(shown[0].first_step || shown[0].step);
    distDiv.dataset.ridges = String(rows.length - missing);
  }

  for (const control of [distMode, distComponent, distWindow]) {
    control.addEventListener("change", () => drawDistribution(lastOrdered));
  }
  slider.addEventListener("input", () => {
    follow.checked = Number(slider.value) >= Number(slider.max);
    drawDistribution(lastOrdered);
  });
  follow.addEventListener("change", () => drawDistribution(lastOrdered));

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
      ack.append(el("span", "ack-done", `✓ acknowledged by ${alert.acknowledged_by || "?"} `),
        alert.acknowledged_at ? timeElement(alert.acknowledged_at) : "", ": ",
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
    // the page's other charts (pool_timeline.js) draw from the same events
    document.dispatchEvent(new CustomEvent("crucible:run-event", { detail: event }));
    if (event.kind === "step") {
      if (!steps.has(event.step)) steps.set(event.step, event);
      if (progressEl) progressEl.hidden = true; // a step: the warm start is over
      lastSeq = Math.max(lastSeq, event.seq);
      const known = componentNames.size;
      for (const name of Object.keys(event.components || {})) componentNames.add(name);
      if (componentNames.size !== known) syncComponents();
      schedule();
    } else if (event.kind === "backfill") {
      heat.dataset.backfilled = "1";
      if (event.decimated && backfillNote) {
        const buckets = [...steps.values()].filter((e) => e.decimated);
        if (buckets.length) {
          backfillNote.hidden = false;
          const span = buckets[0].span;
          backfillNote.textContent = `· older steps ${buckets[0].first_step}–${buckets[buckets.length - 1].step} ` +
            (span > 1 ? `come as ${buckets.length} buckets of ${span} steps (summed histograms, mean metrics)`
              : "come summarised (component histograms read when shown)");
        }
      }
    } else if (event.kind === "alert") {
      alerts.set(event.id, event);
      renderAlert(event);
      schedule();
    } else if (event.kind === "warning") {
      renderWarning(event);
    } else if (event.kind === "evaluation") {
      evaluations.set(event.step, event);
      schedule();
    } else if (event.kind === "status") {
      followStatus(event.status, event.reason);
    } else if (event.kind === "progress") {
      showProgress(event);
    }
  }

  // --- warnings: one <li> per warning id, updated in place as its steps grow -----------------
  const warningPanel = document.getElementById("warnings");
  const warningList = document.getElementById("warning-list");

  function renderWarning(warning) {
    if (!warningList) return;
    let item = warningList.querySelector(`li[data-warning-id="${warning.id}"]`);
    if (!item) {
      item = el("li");
      item.dataset.warningId = String(warning.id);
      warningList.append(item);
    }
    item.dataset.warning = warning.warning;
    const steps = warning.first_step === null || warning.first_step === undefined ? "before the first step"
      : warning.first_step === warning.last_step ? `step ${warning.first_step}`
        : `steps ${warning.first_step}–${warning.last_step}, ${warning.steps} in all`;
    item.replaceChildren(el("b", "warning-title", warning.title), " ", el("span", "warning-steps", steps),
      el("div", "warning-message", warning.message));
    warningPanel.hidden = false;
  }

  // --- the run's status, live: the badge, its reason, what the buttons may do ---------------
  const TERMINAL = new Set((heat.dataset.terminal || "succeeded,failed,cancelled").split(","));
  const cancelForm = document.getElementById("cancel-form");
  const resumeForm = document.getElementById("resume-form");
  const progressEl = document.getElementById("progress");
  let status = statusEl.textContent.trim();
  const PROGRESS_PHASES = { sft: ["SFT warm start", "epoch"] };

  function ended() { return TERMINAL.has(status); }

  function followStatus(next, reason) {
    status = next;
    statusEl.textContent = next;
    statusEl.className = "status status-" + next;
    reasonEl.textContent = reason || "";
    // an ended run cancels no more; only an interrupted one resumes
    if (cancelForm) cancelForm.hidden = ended();
    if (resumeForm) resumeForm.hidden = next !== "interrupted";
    if (progressEl && next !== "running") progressEl.hidden = true;
    if (ended()) live.textContent = `ended (${next})`;
    else if (live.textContent.startsWith("ended")) live.textContent = "live";
  }

  function showProgress(progress) {
    if (!progressEl || ended()) return;
    const [phase, unit] = PROGRESS_PHASES[progress.phase] || [progress.phase, "step"];
    progressEl.textContent = `· ${phase}: ${unit} ${progress.done} of ${progress.total}` +
      (progress.detail ? ` (${progress.detail})` : "");
    progressEl.hidden = false;
  }

  if (cancelForm) {
    cancelForm.addEventListener("submit", (submitted) => {
      const question = cancelForm.querySelector("button").dataset.confirm;
      if (question && !window.confirm(question)) submitted.preventDefault();
    });
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/runs/${runId}/?after=${lastSeq}`);
    socket.onopen = () => { live.textContent = ended() ? `ended (${status})` : "live"; retry = 500; };
    socket.onmessage = (message) => onEvent(JSON.parse(message.data));
    socket.onclose = (closed) => {
      if (closed.code === 4403) { live.textContent = "not allowed: sign in with a role that may watch runs"; return; }
      if (closed.code === 4404) { live.textContent = "this run does not exist"; return; }
      if (!ended()) live.textContent = "reconnecting…";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }

  draw();
  connect();
})();
