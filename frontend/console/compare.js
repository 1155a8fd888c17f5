// Two runs (or more) on the same axes: one chart per metric, one colour per run.
// An ES module: `npm run build` bundles plotly.js from npm into it; unbundled, the page's
// import map points the name at the plotly wheel's copy (console/frontend.py).
import Plotly from "plotly.js-dist-min";

import { emptyFrame, stepAxis } from "./lib/axes.js";
import { metricPicker } from "./lib/metric_picker.js";

(function () {
  "use strict";
  const source = document.getElementById("compare-data");
  if (!source) return;
  const runs = JSON.parse(source.textContent);
  const CONFIG = { displayModeBar: false, responsive: true };
  // Each series says what it is: a run's total reward is named with its own formula (a total with
  // a quality share is not plotted as if it were correctness); correctness has a chart of its own.
  const CHARTS = [
    ["cmp-correctness", "Correctness (share of hidden tests passed)", (c) => [c.step, c.correctness],
      { range: [0, 1] }],
    ["cmp-reward-mean", "Mean total reward (each run's own weights, in the legend)",
      (c) => [c.step, c.reward_mean], { range: [0, 1] }, (run) => `run ${run.id}: ${run.reward}`],
    ["cmp-pass-rate", "Pass rate (all hidden tests pass)", (c) => [c.step, c.pass_rate], { range: [0, 1] }],
    ["cmp-heldout", "Held-out pass@1", (c) => [c.heldout_step, c.heldout_pass1], { range: [0, 1] }],
    ["cmp-flag-rate", "Hack-flag rate (flags/rate)", (c) => [c.step, c.flag_rate], { rangemode: "tozero" }],
    ["cmp-entropy", "Policy entropy", (c) => [c.step, c.entropy], { rangemode: "tozero" }],
    ["cmp-kl", "KL to the reference (k3)", (c) => [c.step, c.kl], { rangemode: "tozero" }],
  ];
  // one step range for every chart, so that a step sits at the same place in each
  const allSteps = runs.flatMap((run) => [...run.curves.step, ...run.curves.heldout_step]);
  const xrange = allSteps.length ? [Math.min(...allSteps) - 0.5, Math.max(...allSteps) + 0.5] : undefined;
  const present = (y) => y.some((v) => v !== null && v !== undefined);
  const xaxis = stepAxis(allSteps, 0, xrange ? { range: xrange } : {});
  for (const [id, title, pick, yaxis, name] of CHARTS) {
    const div = document.getElementById(id);
    const traces = runs.map((run) => {
      const [x, y] = pick(run.curves);
      const label = name ? name(run) : `run ${run.id}`;
      return { type: "scatter", mode: x.length > 60 ? "lines" : "lines+markers", name: label,
        x: x, y: y, line: { color: run.colour, width: 2 }, marker: { color: run.colour, size: 5 },
        connectgaps: true, hovertemplate: `${label}<br>step %{x}<br>%{y:.4f}<extra></extra>` };
    });
    const without = runs.filter((run, i) => !present(traces[i].y)).map((run) => `run ${run.id}`);
    const note = without.length === runs.length ? " (not recorded)" : without.length ? ` (none for ${without.join(", ")})` : "";
    Plotly.newPlot(div, traces, {
      title: { text: title + note }, xaxis: xaxis, margin: { t: 40, r: 20 },
      legend: { orientation: "h", y: -0.22 }, showlegend: true,
      ...emptyFrame(without.length === runs.length, yaxis, "not recorded by these runs"),
    }, CONFIG);
    div.dataset.traces = String(traces.length);
  }
  document.getElementById("compare-charts").dataset.drawn = "1";

  // --- any metric the runs record: one chart per picked metric, every run overlaid ------------
  const pickerRoot = document.getElementById("cmp-metric-picker");
  const holder = document.getElementById("cmp-picked");
  if (!pickerRoot) return;
  const series = new Map(); // run id -> {step, series}

  async function read(names) {
    const query = names.map((n) => `name=${encodeURIComponent(n)}`).join("&");
    await Promise.all(runs.map(async (run) => {
      const response = await fetch(`/api/runs/${run.id}/metrics/?${query}`,
        { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (response.ok) series.set(run.id, await response.json());
    }));
  }

  function drawPicked(names) {
    holder.replaceChildren();
    for (const name of names) {
      const div = document.createElement("div");
      div.className = "chart";
      div.dataset.metric = name;
      holder.append(div);
      const traces = runs.map((run) => {
        const answer = series.get(run.id) || { step: [], series: {} };
        const y = answer.series[name] || [];
        return { type: "scatter", mode: y.length > 60 ? "lines" : "lines+markers", name: `run ${run.id}`,
          x: answer.step.slice(0, y.length), y: y, connectgaps: true,
          line: { color: run.colour, width: 2 }, marker: { color: run.colour, size: 5 },
          hovertemplate: `run ${run.id}<br>step %{x}<br>%{y:.4f}<extra></extra>` };
      });
      const without = traces.filter((t) => !present(t.y)).map((t) => t.name);
      const note = without.length === runs.length ? " (not recorded)" : without.length ? ` (none for ${without.join(", ")})` : "";
      const steps = traces.flatMap((t) => t.x);
      Plotly.newPlot(div, traces, { title: { text: name + note }, xaxis: stepAxis(steps, 0, xrange ? { range: xrange } : {}),
        margin: { t: 40, r: 20 }, legend: { orientation: "h", y: -0.22 }, showlegend: true,
        ...emptyFrame(without.length === runs.length, { rangemode: "tozero" }, "not recorded by these runs") }, CONFIG);
      div.dataset.traces = String(traces.filter((t) => present(t.y)).length);
    }
    holder.dataset.charts = String(names.length);
  }

  const picker = metricPicker(pickerRoot, {
    onChange: async (names) => {
      const missing = names.filter((n) => !runs.every((run) => (series.get(run.id)?.series || {})[n]));
      if (missing.length) await read(names);
      drawPicked(names);
    },
  });
  picker.setNames(JSON.parse(document.getElementById("metric-names").textContent));
  picker.start();
})();
