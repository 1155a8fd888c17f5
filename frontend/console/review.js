// The labelling page's keys. 1-9 choose a label and nothing more: the note box takes the focus
// (a note is what the next keys are for), and the label is sent only on Ctrl+Enter or the Save
// button, so a key never files a label without its note or turn and moves on. n: next item,
// r: the replay in a new tab, Esc: leave the note box. Keys typed into a field stay in the field.
// Clicking a turn of the replay (or its cell in the turn index) makes it the label's "at turn".
(function () {
  "use strict";
  const form = document.getElementById("label-form");
  if (!form) return;
  const note = form.querySelector("textarea[name=note]");
  const turn = form.querySelector("input[name=turn]");
  const picked = document.getElementById("turn-picked");
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
    buttons.forEach(function (b) { b.classList.toggle("chosen", b === button); });
    markNote();
    form.dataset.chosen = button.querySelector("input").value;
    note.focus();
  }

  buttons.forEach(function (b) {
    b.querySelector("input").addEventListener("change", function () { choose(b); });
  });
  note.addEventListener("input", markNote);
  form.addEventListener("submit", function (e) {
    if (markNote()) { e.preventDefault(); note.focus(); }
  });

  if (turn) {
    document.addEventListener("crucible:turn-select", function (event) {
      if (event.detail.how !== "click") return;
      turn.value = String(event.detail.number);
      if (picked) picked.textContent = `turn ${event.detail.number}, picked on the replay`;
    });
    turn.addEventListener("input", function () { if (picked) picked.textContent = ""; });
  }

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
