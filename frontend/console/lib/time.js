// The one way the console writes a time: "YYYY-MM-DD HH:MM:SS UTC", as the server's
// {{ value|when }} filter does (console/templatetags/crucible.py). `value`: a Date, an ISO
// string, or seconds since the epoch.
export function when(value) {
  const date = value instanceof Date ? value : typeof value === "number" ? new Date(value * 1000) : new Date(value);
  if (Number.isNaN(date.getTime())) return "";
  return date.toISOString().slice(0, 19).replace("T", " ") + " UTC";
}

// A <time> element holding `value` in that format (its datetime attribute the ISO instant).
export function timeElement(value) {
  const node = document.createElement("time");
  const text = when(value);
  if (text) node.dateTime = text.slice(0, 19).replace(" ", "T") + "Z";
  node.textContent = text;
  return node;
}
