// The labelling page's keys: 1-5 choose a label; it is sent at once when it needs no note (correct) or the
// note is already written, otherwise the note box takes the focus and Ctrl+Enter sends. n: next item,
// r: the replay in a new tab, Esc: leave the note box. Keys typed into a field stay in the field.
(function () {
  "use strict";
  const form = document.getElementById("label-form");
  if (!form) return;
  const note = form.querySelector("textarea[name=note]");
  const buttons = Array.from(form.querySelectorAll(".label-btn"));

  function needsNote(button) { return button && button.dataset.needsNote === "1"; }
  function chosen() { return buttons.find(function (b) { return b.querySelector("input").checked; }); }
  function markNote() {
    const missing = needsNote(chosen()) && !note.value.trim();
    note.classList.toggle("needs-note", missing);
    return missing;
  }
  function send() {
    if (!chosen()) { buttons[0].focus(); return; }
    if (markNote()) { note.focus(); return; }
    if (form.requestSubmit) form.requestSubmit(); else form.submit();
  }
  function choose(button) {
    button.querySelector("input").checked = true;
    if (needsNote(button) && !note.value.trim()) { markNote(); note.focus(); return; }
    send();
  }

  buttons.forEach(function (b) { b.querySelector("input").addEventListener("change", markNote); });
  note.addEventListener("input", markNote);
  form.addEventListener("submit", function (e) {
    if (markNote()) { e.preventDefault(); note.focus(); }
  });

  document.addEventListener("keydown", function (e) {
    const typing = e.target.closest && e.target.closest("input[type=text], input[type=number], textarea, select, [contenteditable]");
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && (!typing || e.target === note)) { e.preventDefault(); send(); return; }
    if (typing) {
      if (e.key === "Escape") e.target.blur();
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const button = buttons.find(function (b) { return b.dataset.key === e.key; });
    if (button) { e.preventDefault(); choose(button); return; }
    if (e.key === "n" && form.dataset.next) { window.location.href = form.dataset.next; return; }
    if (e.key === "r" && form.dataset.replay) { window.open(form.dataset.replay, "_blank", "noopener"); }
  });
})();
