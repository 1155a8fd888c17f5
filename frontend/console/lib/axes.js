// Step axes of the console's charts: whole-number ticks only (a step is never 1.2), and a
// chart with no data yet keeps a sensible frame (0 up to the run's steps, y from 0 to 1) with a
// "no steps yet" note instead of plotly's empty -1..6.
export const EMPTY_NOTE = "no steps yet";

// A tick spacing of 1, 2 or 5 times a power of ten giving about `target` ticks over `span`.
function niceStep(span, target) {
  const raw = Math.max(1, span / target);
  const power = 10 ** Math.floor(Math.log10(raw));
  const mantissa = raw / power;
  return (mantissa <= 1 ? 1 : mantissa <= 2 ? 2 : mantissa <= 5 ? 5 : 10) * power;
}

// The x axis of a chart over `steps` (the step numbers drawn); `total`: the run's step count,
// the frame of an empty chart. `extra` is merged in (a title, a range...).
export function stepAxis(steps, total, extra) {
  const axis = { title: { text: "step" }, ...(extra || {}) };
  const present = steps.filter((s) => typeof s === "number" && Number.isFinite(s));
  if (!present.length) {
    const end = Math.max(1, Number(total) || 10);
    return { ...axis, range: [0, end], tickmode: "linear", tick0: 0, dtick: niceStep(end, 8) };
  }
  const span = Math.max(...present) - Math.min(...present);
  // plotly picks whole numbers on its own once the span is wide; narrow spans get fractions
  return span < 12 ? { ...axis, tickmode: "linear", tick0: 0, dtick: niceStep(span, 8) } : axis;
}

// What an empty chart adds to its layout: a y frame and the note (default "no steps yet") in the
// middle.
export function emptyFrame(isEmpty, yaxis, note) {
  if (!isEmpty) return { yaxis: yaxis || {} };
  return {
    yaxis: { ...(yaxis || {}), range: [0, 1], autorange: false },
    annotations: [{ text: note || EMPTY_NOTE, xref: "paper", yref: "paper", x: 0.5, y: 0.5, showarrow: false,
      font: { size: 14, color: "#8a8f99" } }],
  };
}
