// An environment version's page follows its build live (console/group_consumers.py): the status
// badge, the facts (store key, size, seconds, when the layers were built), the error and the log,
// each written as text (a build log is tool output). The row's state arrives first on every
// (re)connection, then each change as it is persisted.
import { liveSocket } from "./lib/live.js";
import { timeElement } from "./lib/time.js";

(function () {
  "use strict";
  const panel = document.getElementById("build-panel");
  if (!panel || !panel.dataset.socket) return;
  const status = document.getElementById("build-status");
  const facts = document.getElementById("build-facts");
  const log = document.getElementById("build-log");
  const error = document.getElementById("build-error");
  const again = document.getElementById("build-again");
  const state = document.getElementById("build-live");

  function mib(bytes) {
    return bytes >= 1048576 ? `${(bytes / 1048576).toFixed(1)} MiB` : `${(bytes / 1024).toFixed(1)} KiB`;
  }

  function render(build) {
    panel.dataset.status = build.build_status;
    status.textContent = build.build_status_display;
    status.className = `badge build-${build.build_status}`;
    const parts = [];
    if (build.build_key) {
      const key = document.createElement("code");
      key.textContent = build.build_key;
      parts.push(["store key ", key]);
    }
    if (build.size_bytes !== null && build.size_bytes !== undefined) parts.push([mib(build.size_bytes)]);
    if (build.build_seconds !== null && build.build_seconds !== undefined) parts.push([`built in ${build.build_seconds.toFixed(1)} s`]);
    if (build.built_at) parts.push([timeElement(build.built_at)]);
    facts.replaceChildren();
    parts.forEach((nodes, i) => facts.append(...(i ? [" · "] : []), ...nodes));
    error.textContent = build.build_error || "";
    error.hidden = !build.build_error;
    log.textContent = build.build_log
      || (build.build_status === "built" ? "nothing to build: the runtime's own interpreter, no layers" : "not built yet");
    if (again) again.textContent = build.build_status === "built" ? "build again (a cache hit)" : "build";
  }

  liveSocket(panel.dataset.socket, {
    onEvent: (event) => { if (event.kind === "build") render(event); },
    onState: (text) => { if (state) state.textContent = text; panel.dataset.live = text; },
  });
})();
