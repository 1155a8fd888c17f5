// The runs table: Compare is enabled with two to six runs ticked; the header box ticks them all.
(function () {
  "use strict";
  const button = document.getElementById("compare-submit");
  if (!button) return;
  const count = document.getElementById("selected-count");
  const picks = () => Array.from(document.querySelectorAll("input.run-pick"));

  function update() {
    const n = picks().filter((p) => p.checked).length;
    button.disabled = n < 2 || n > 6;
    count.textContent = n === 0 ? "tick runs to compare them"
      : n > 6 ? `${n} selected: compare six at most` : `${n} selected`;
  }

  document.addEventListener("change", (event) => {
    if (event.target.id === "select-all") picks().forEach((p) => { p.checked = event.target.checked; });
    if (event.target.id === "select-all" || event.target.classList.contains("run-pick")) update();
  });
  update();
})();
