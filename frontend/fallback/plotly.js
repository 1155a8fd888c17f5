// The unbundled console's "plotly.js-dist-min": with no front-end build (no Node on this
// machine), the page's import map (console/templatetags/frontend.py) resolves that name here.
// This runs the plotly wheel's plotly.min.js, byte for byte the npm package's file of the same
// version (tests/console/test_frontend_build.py), which sets window.Plotly, and exports it.
import "../plotly/plotly.min.js";

export default window.Plotly;
