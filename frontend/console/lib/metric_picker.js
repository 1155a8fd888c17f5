// A picker of any metric a run records: a select of every name (grouped by namespace: agent/,
// reward/, timing/...) and an "add" button; the chosen show as removable chips, and are kept in
// the address (?metric=a&metric=b) so that a view can be shared or reloaded.
export function metricPicker(root, { onChange, param = "metric" }) {
  const select = root.querySelector(".metric-select");
  const add = root.querySelector(".metric-add");
  const chips = root.querySelector(".metric-chips");
  const known = new Set();
  let chosen = new URLSearchParams(location.search).getAll(param).filter(Boolean);

  function keep() {
    const query = new URLSearchParams(location.search);
    query.delete(param);
    chosen.forEach((name) => query.append(param, name));
    const search = query.toString();
    history.replaceState(history.state, "", `${location.pathname}${search ? `?${search}` : ""}${location.hash}`);
  }

  function drawChips() {
    chips.replaceChildren();
    for (const name of chosen) {
      const chip = document.createElement("button");
      chip.type = "button";
      chip.className = "metric-chip";
      chip.dataset.metric = name;
      chip.title = `remove ${name} from the chart`;
      chip.textContent = `${name} ×`;
      chip.addEventListener("click", () => {
        chosen = chosen.filter((n) => n !== name);
        changed();
      });
      chips.append(chip);
    }
    root.dataset.chosen = chosen.join(",");
  }

  function changed() {
    keep();
    drawChips();
    onChange(chosen.slice());
  }

  // every name seen so far, grouped by what comes before the first "/"
  function setNames(names) {
    let grew = false;
    for (const name of names) if (!known.has(name)) { known.add(name); grew = true; }
    if (!grew) return;
    const current = select.value;
    const groups = new Map();
    for (const name of [...known].sort()) {
      const group = name.includes("/") ? name.split("/")[0] : "other";
      if (!groups.has(group)) groups.set(group, []);
      groups.get(group).push(name);
    }
    select.replaceChildren();
    for (const [group, members] of groups) {
      const optgroup = document.createElement("optgroup");
      optgroup.label = group;
      for (const name of members) {
        const option = document.createElement("option");
        option.value = name;
        option.textContent = name;
        optgroup.append(option);
      }
      select.append(optgroup);
    }
    if (known.has(current)) select.value = current;
    root.dataset.names = String(known.size);
  }

  add.addEventListener("click", () => {
    const name = select.value;
    if (!name || chosen.includes(name)) return;
    chosen.push(name);
    changed();
  });

  drawChips();
  return { setNames, chosen: () => chosen.slice(), start: () => onChange(chosen.slice()) };
}

// Every numeric metric's name in an event's metrics.
export function metricNames(metrics) {
  return Object.entries(metrics || {}).filter(([, v]) => typeof v === "number").map(([k]) => k);
}
