// Two runs (or more) on the same axes: one chart per metric, one colour per run.
// An ES module: `npm run build` bundles plotly.js from npm into it; unbundled, the page's
// import map points the name at the plotly wheel's copy (console/frontend.py).
import Plotly from "plotly.js-dist-min";

import { emptyFrame, stepAxis } from "./lib/axes.js";

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
})();
