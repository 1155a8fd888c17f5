// The API keys page: "Copy" puts the new key on the clipboard (the key is shown only once).
(function () {
  "use strict";
  const button = document.getElementById("copy-key");
  if (!button) return;
  const source = document.getElementById(button.dataset.target);
  const state = document.getElementById("copy-state");

  function selectKey() {
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  button.addEventListener("click", async () => {
    const key = source.textContent.trim();
    try {
      await navigator.clipboard.writeText(key);
      state.textContent = "copied to the clipboard";
      button.dataset.copied = "1";
    } catch (failure) {
      // no clipboard access (an insecure origin, a refused permission): select it for Ctrl+C
      selectKey();
      state.textContent = "selected: press Ctrl+C (Cmd+C) to copy it";
    }
  });
})();
