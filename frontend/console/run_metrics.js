// The run page's agent and training-signal charts, and its metric picker. Fed by the page's one
// websocket (run_live.js re-dispatches every event on document as "crucible:run-event"; loaded
// before it, so it misses none):
// - Agent episodes: how each step's trajectories ended (submitted, truncated, out of turns, timed
//   out: agent/*) with the tool-call parse errors;
// - Tool calls: the calls per tool per step (agent/calls_<tool>) with the mean turns per trajectory;
// - Training signal: tokens trained per step (tokens/trained), and the share of groups that carried
//   no advantage (groups/zero_advantage of groups/total) with the groups the sampler skipped;
// - any metric the run records, picked by name (lib/metric_picker.js), read in full from
//   /api/runs/<id>/metrics/ (averaged over buckets past 1,000 steps), then grown by live steps.
import Plotly from "plotly.js-dist-min";

import { emptyFrame, stepAxis } from "./lib/axes.js";
import { metricNames, metricPicker } from "./lib/metric_picker.js";
import { CHART_CONFIG, runPage } from "./lib/run_page.js";

(function () {
  "use strict";
  const page = runPage();
  if (!page) return;
  const { runId, totalSteps } = page;
  const CONFIG = CHART_CONFIG;
  const steps = new Map(); // step -> metrics (full steps only: buckets carry few metrics)
  let pending = false;

  const episodesDiv = document.getElementById("agent-episodes");
  const toolsDiv = document.getElementById("agent-tools");
  const signalDiv = document.getElementById("training-signal");
  const pickedDiv = document.getElementById("picked-metrics");
  const ENDS = [["agent/submitted", "submitted", "#2e7d32"], ["agent/truncated", "truncated (context)", "#c77c02"],
    ["agent/max_turns", "out of turns", "#7f8c8d"], ["agent/timeout", "timed out", "#b3261e"]];

  function frame(title, x, empty, more) {
    const { yaxis, ...rest } = more || {};
    return { title: { text: title }, xaxis: stepAxis(x, totalSteps), margin: { t: 40, r: 50 },
      legend: { orientation: "h", y: -0.25 }, ...emptyFrame(empty, yaxis), ...rest };
  }

  function draw() {
    pending = false;
    const ordered = [...steps.entries()].sort((a, b) => a[0] - b[0]);
    const x = ordered.map(([s]) => s);
    const of = (name) => ordered.map(([, m]) => (typeof m[name] === "number" ? m[name] : null));
    const has = (name) => of(name).some((v) => v !== null);
    if (episodesDiv) {
      const agent = ENDS.some(([name]) => has(name));
      Plotly.react(episodesDiv, [
        ...ENDS.map(([name, label, colour]) => ({ type: "bar", name: label, x: x, y: of(name), marker: { color: colour } })),
        { type: "scatter", mode: "lines+markers", name: "tool-call parse errors", x: x, y: of("agent/parse_errors"),
          line: { color: "#6a1b9a", dash: "dot" } },
      ], frame(agent ? "Agent episodes: how trajectories ended, and parse errors"
        : "Agent episodes (not an agent run, or no step yet)", x, !agent, { barmode: "stack", yaxis: { title: { text: "trajectories" }, rangemode: "tozero" } }), CONFIG);
      episodesDiv.dataset.traces = String(ENDS.filter(([name]) => has(name)).length);
    }
    if (toolsDiv) {
      const tools = [...new Set(ordered.flatMap(([, m]) => Object.keys(m).filter((k) => k.startsWith("agent/calls_"))))].sort();
      Plotly.react(toolsDiv, [
        ...tools.map((name) => ({ type: "bar", name: name.slice("agent/calls_".length), x: x, y: of(name) })),
        { type: "scatter", mode: "lines+markers", name: "turns per trajectory (mean)", x: x, y: of("agent/turns_mean"),
          yaxis: "y2", line: { color: "#1d2330" } },
      ], frame(tools.length ? "Tool calls per step, by tool" : "Tool calls (none recorded)", x, !tools.length,
        { barmode: "stack", yaxis: { title: { text: "calls" }, rangemode: "tozero" },
          yaxis2: { title: { text: "turns" }, overlaying: "y", side: "right", rangemode: "tozero", showgrid: false,
            tickformat: ".1f" } }), CONFIG);
      toolsDiv.dataset.tools = tools.join(",");
    }
    if (signalDiv) {
      const share = ordered.map(([, m]) => (typeof m["groups/total"] === "number" && m["groups/total"] > 0
        ? (m["groups/zero_advantage"] || 0) / m["groups/total"] : null));
      const signal = has("tokens/trained");
      Plotly.react(signalDiv, [
        { type: "bar", name: "tokens trained", x: x, y: of("tokens/trained"), marker: { color: "#2f6fb3" } },
        { type: "scatter", mode: "lines+markers", name: "groups without advantage (share)", x: x, y: share,
          yaxis: "y2", line: { color: "#c77c02" } },
        { type: "scatter", mode: "lines", name: "groups skipped by the sampler (total)", x: x, y: of("sampler/groups_skipped"),
          yaxis: "y3", line: { color: "#7f8c8d", dash: "dot" } },
      ], frame("Training signal: tokens trained, groups without advantage", x, !signal, {
        yaxis: { title: { text: "tokens" }, rangemode: "tozero" },
        yaxis2: { title: { text: "share of groups" }, overlaying: "y", side: "right", range: [0, 1.05], showgrid: false,
          tickformat: ".0%", dtick: 0.25 },
        yaxis3: { overlaying: "y", side: "right", visible: false, rangemode: "tozero" } }), CONFIG);
      signalDiv.dataset.zeroTokenSteps = String(of("tokens/trained").filter((v) => v === 0).length);
    }
    drawPicked();
  }

  // --- the metric picker -------------------------------------------------------------------
  const pickerRoot = document.getElementById("metric-picker");
  const fetched = { step: [], series: {}, binned: false }; // from the API, per chosen metric
  let chosenNow = [];

  function drawPicked() {
    if (!pickedDiv) return;
    const last = fetched.step.length ? fetched.step[fetched.step.length - 1] : 0;
    const live = [...steps.entries()].filter(([s]) => s > last).sort((a, b) => a[0] - b[0]);
    const traces = chosenNow.map((name) => {
      const ys = fetched.series[name] || [];
      return { type: "scatter", mode: "lines+markers", name: name, connectgaps: true,
        x: [...fetched.step.slice(0, ys.length), ...live.map(([s]) => s)],
        y: [...ys, ...live.map(([, m]) => (typeof m[name] === "number" ? m[name] : null))] };
    });
    const x = traces.flatMap((t) => t.x);
    Plotly.react(pickedDiv, traces, frame(chosenNow.length ? `Picked metrics${fetched.binned ? " (older steps averaged)" : ""}`
      : "Pick any metric the run records, above", x, !chosenNow.length || !x.length,
    { yaxis: { rangemode: "tozero" }, legend: { orientation: "h", y: -0.25 } }), CONFIG);
    pickedDiv.dataset.traces = String(traces.length);
    pickedDiv.dataset.points = String(x.length);
  }

  const picker = pickerRoot ? metricPicker(pickerRoot, {
    onChange: async (names) => {
      chosenNow = names;
      if (!names.length) { drawPicked(); return; }
      const query = names.map((n) => `name=${encodeURIComponent(n)}`).join("&");
      try {
        const response = await fetch(`/api/runs/${runId}/metrics/?${query}`,
          { credentials: "same-origin", headers: { Accept: "application/json" } });
        const answer = await response.json();
        if (!response.ok) throw new Error(answer.error || response.status);
        Object.assign(fetched, { step: answer.step, series: answer.series, binned: answer.binned });
        picker.setNames(answer.names || []);
      } catch (failure) {
        pickerRoot.dataset.error = String(failure.message || failure);
      }
      drawPicked();
      pickedDiv.dataset.loaded = String(Number(pickedDiv.dataset.loaded || 0) + 1);
    },
  }) : null;

  document.addEventListener("crucible:run-event", (event) => {
    const e = event.detail;
    if (e.kind !== "step") return;
    if (!e.decimated) steps.set(e.step, e.metrics || {});
    if (picker) picker.setNames(metricNames(e.metrics));
    if (!pending) { pending = true; requestAnimationFrame(draw); }
  });
  if (picker) picker.start();
  draw();
})();
