// The launch form: the settings only agent runs read show while the rollout mode is "agent"; a task
// set of repository tasks (they train as agents) switches the mode to agent and says why. The
// server checks everything again (console/launch_form.py).
(function () {
  "use strict";
  const form = document.getElementById("launch-form");
  if (!form) return;
  const mode = document.getElementById("id_rollout_mode");
  const taskSet = document.getElementById("id_task_set");
  const note = document.getElementById("mode-note");
  const repository = new Set((form.dataset.repositorySets || "").split(",").filter(Boolean));

  function showAgentSettings() {
    const agent = mode.value === "agent";
    for (const row of form.querySelectorAll("[data-agent-only]")) row.hidden = !agent;
    form.dataset.mode = mode.value;
  }

  // the mode a repository set replaced, put back when a set of functions is chosen again
  let replaced = null;
  function followTaskSet() {
    const needsAgent = repository.has(taskSet.value);
    if (needsAgent && mode.value !== "agent") { replaced = mode.value; mode.value = "agent"; }
    if (!needsAgent && replaced !== null) { mode.value = replaced; replaced = null; }
    note.hidden = !needsAgent;
    showAgentSettings();
  }

  mode.addEventListener("change", () => { replaced = null; showAgentSettings(); });
  taskSet.addEventListener("change", followTaskSet);
  followTaskSet();
})();
