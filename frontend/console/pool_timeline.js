// The sandbox pool over a run (run page): live sandbox slots, queue depth, demand and the
// autoscaler's target against wall-clock time, with the trainer's phases (sft, rollout, grading,
// update, eval, checkpoint, idle) as coloured bands behind them. Each step event carries its
// step's ``timeline`` (training/phase.py: phase segments and samples every 0.5 s); run_live.js
// owns the websocket and re-dispatches every event on ``document`` as "crucible:run-event", so
// this chart is fed by the same socket, the same back-fill and the same live step events.
// Loaded before run_live.js (document order), so no event is dispatched before it listens.
import Plotly from "plotly.js-dist-min";

const div = document.getElementById("pool-timeline");
if (div) {
  const PHASE_COLOURS = {
    sft: "#8e6cc2", rollout: "#2f6fb3", grading: "#e08a1e", update: "#c0392b",
    eval: "#17a2a2", checkpoint: "#7f8c8d", idle: "#d5d8dc",
  };
  const KEEP_STEPS = 300; // the newest steps' timelines kept in the page (the back-fill sends 60)
  const timelines = new Map(); // step -> timeline
  let pending = false;

  const ms = (seconds) => seconds * 1000; // plotly's date axes read milliseconds since the epoch

  // One series over the kept steps, a gap (null) where a step's window is missing.
  function series(ordered, name) {
    const x = [], y = [], step = [];
    let end = null;
    for (const [number, tl] of ordered) {
      if (end !== null && tl.start - end > 1) { x.push(ms(end)); y.push(null); step.push(null); }
      (tl.t || []).forEach((t, i) => { x.push(ms(t)); y.push((tl[name] || [])[i] ?? null); step.push(number); });
      end = tl.end;
    }
    return { x, y, step };
  }

  // Phase segments of consecutive steps, the same phase touching across a step boundary merged.
  function bands(ordered) {
    const merged = [];
    for (const [, tl] of ordered) {
      for (const [start, end, phase] of tl.phases || []) {
        const last = merged[merged.length - 1];
        if (last && last.phase === phase && Math.abs(last.end - start) < 0.01) last.end = end;
        else merged.push({ start, end, phase });
      }
    }
    return merged;
  }

  function draw() {
    pending = false;
    const ordered = [...timelines.entries()].sort((a, b) => a[0] - b[0]);
    const slots = series(ordered, "slots");
    const depth = series(ordered, "depth");
    const demand = series(ordered, "demand");
    const target = series(ordered, "target");
    const hasTarget = target.y.some((v) => typeof v === "number");
    const phases = bands(ordered);
    const seen = [...new Set(phases.map((b) => b.phase))];
    const hover = (label) => `%{customdata}<br>${label} %{y}<extra></extra>`;
    const stepText = (s) => s.step.map((n) => (n === null ? "" : `step ${n}`));
    const traces = [
      { type: "scatter", mode: "lines", name: "pool (live slots)", x: slots.x, y: slots.y, customdata: stepText(slots),
        line: { shape: "hv", width: 2.5, color: "#1d2330" }, hovertemplate: hover("live slots") },
      { type: "scatter", mode: "lines", name: "queue depth", x: depth.x, y: depth.y, customdata: stepText(depth),
        line: { shape: "hv", width: 1.5, color: "#2e7d32" }, fill: "tozeroy", fillcolor: "rgba(46,125,50,0.12)",
        hovertemplate: hover("queued") },
      { type: "scatter", mode: "lines", name: "demand", x: demand.x, y: demand.y, customdata: stepText(demand),
        line: { shape: "hv", width: 1.5, dash: "dot", color: "#b3261e" }, hovertemplate: hover("demand") },
    ];
    if (hasTarget) {
      traces.push({ type: "scatter", mode: "lines", name: "autoscaler target (slots)", x: target.x, y: target.y,
        customdata: stepText(target), line: { shape: "hv", width: 1.5, dash: "dash", color: "#6a1b9a" },
        hovertemplate: hover("target") });
    }
    // Legend entries for the bands (shapes have none of their own).
    for (const phase of seen) {
      traces.push({ type: "scatter", mode: "markers", name: `phase: ${phase}`, x: [null], y: [null],
        hoverinfo: "skip", marker: { symbol: "square", size: 12, color: PHASE_COLOURS[phase] || "#999", opacity: 0.5 } });
    }
    const shapes = phases.map((b) => ({ type: "rect", xref: "x", yref: "paper", x0: ms(b.start), x1: ms(b.end),
      y0: 0, y1: 1, fillcolor: PHASE_COLOURS[b.phase] || "#999", opacity: 0.22, line: { width: 0 }, layer: "below" }));
    const title = ordered.length ? "Sandbox pool and trainer phases"
      : "Sandbox pool and trainer phases (no step has recorded a timeline yet)";
    Plotly.react(div, traces, {
      title: { text: title }, margin: { t: 40, r: 20 }, shapes: shapes,
      // Until a step brings samples there is no time range to show: hide the axes rather than
      // let plotly invent one (it shows the year 2000).
      xaxis: { type: "date", title: { text: "time" }, visible: ordered.length > 0 },
      yaxis: { title: { text: "slots / executions" }, rangemode: "tozero", visible: ordered.length > 0 },
      legend: { orientation: "h", y: -0.2 }, hovermode: "x unified",
    }, { displayModeBar: false, responsive: true });
    div.dataset.steps = String(ordered.length);
    div.dataset.samples = String(slots.y.filter((v) => v !== null).length);
    div.dataset.bands = String(shapes.length);
    div.dataset.phases = seen.join(",");
  }

  function schedule() {
    if (!pending) { pending = true; requestAnimationFrame(draw); }
  }

  document.addEventListener("crucible:run-event", (message) => {
    const event = message.detail || {};
    if (event.kind !== "step" || !event.timeline || !Array.isArray(event.timeline.t)) return;
    timelines.set(event.step, event.timeline);
    while (timelines.size > KEEP_STEPS) timelines.delete(Math.min(...timelines.keys()));
    schedule();
  });
  draw();
}
