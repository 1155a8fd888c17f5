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
    Plotly.react(meanDiv, [
      { type: "scatter", mode: "lines+markers", name: "reward/mean", x: x, y: ordered.map((e) => e.reward_mean) },
      { type: "scatter", mode: "lines", name: "reward/pass_rate", x: x,
        y: ordered.map((e) => (e.metrics || {})["reward/pass_rate"]) },
    ], { title: { text: "Mean reward and pass rate" }, xaxis: { title: { text: "step" } },
         yaxis: { range: [0, 1] }, margin: { t: 40, r: 20 } },
      { displayModeBar: false, responsive: true });
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

  function onEvent(event) {
    if (event.kind === "step") {
      if (!steps.has(event.step)) steps.set(event.step, event);
      lastSeq = Math.max(lastSeq, event.seq);
      if (!pending) { pending = true; requestAnimationFrame(draw); }
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
