// What every chart script of a run's page reads first: the heatmap's element, which carries the
// run's id and step count, and plotly's settings shared by the page's charts. Null off a run page.
export const CHART_CONFIG = { displayModeBar: false, responsive: true };

export function runPage() {
  const heat = document.getElementById("reward-heatmap");
  if (!heat) return null;
  return { heat: heat, runId: heat.dataset.runId, totalSteps: Number(heat.dataset.totalSteps) || 0 };
}
