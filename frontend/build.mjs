// `npm run build`: bundle the console's page scripts with plotly.js (from npm, pinned in
// package-lock.json) into frontend/dist/, which Django's staticfiles serves (core/frontend.py).
//
// Entries: every top-level frontend/console/*.js (one ES module per page) and *.css. Modules
// under frontend/console/ subfolders are shared code, bundled into the entries that import them.
// Code shared by several entries (plotly.js) goes to one content-hashed chunk, so a browser
// downloads it once for every page. Entries keep their names (console/run_live.js), so the
// templates name them with {% static %} whether the build or the unbundled sources are served.
//
// The output is written to a temporary folder and moved into place at the end: a failed or
// interrupted build never leaves a half-written dist/. dist/build-info.json records the SHA-256
// of every input (core/frontend.py compares them to tell a current build from a stale one).
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

import * as esbuild from "esbuild";

const ROOT = dirname(fileURLToPath(import.meta.url));
const SOURCES = join(ROOT, "console");
const DIST = join(ROOT, "dist");
// The files besides frontend/console/** whose change calls for a new build (core/frontend.py
// keeps the same list: BUILD_FILES).
const BUILD_FILES = ["package.json", "package-lock.json", "build.mjs"];

function filesUnder(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? filesUnder(path) : entry.isFile() ? [path] : [];
  });
}

const posix = (path) => relative(ROOT, path).split(sep).join("/");
const sha256 = (path) => createHash("sha256").update(readFileSync(path)).digest("hex");

const entryPoints = readdirSync(SOURCES)
  .filter((name) => /\.(js|css)$/.test(name) && statSync(join(SOURCES, name)).isFile())
  .sort()
  .map((name) => join(SOURCES, name));
if (entryPoints.length === 0) {
  throw new Error(`no entry point: ${SOURCES} holds no .js or .css file`);
}

const staging = `${DIST}.partial-${process.pid}`;
rmSync(staging, { recursive: true, force: true });
let result;
try {
  result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints,
    outbase: ROOT,
    outdir: staging,
    entryNames: "[dir]/[name]",
    chunkNames: "console/chunks/[name]-[hash]",
    assetNames: "console/assets/[name]-[hash]",
    bundle: true,
    splitting: true,
    format: "esm",
    // Browsers with ES modules and import maps (the unbundled fallback needs both).
    target: ["chrome89", "firefox108", "safari16.4", "edge89"],
    minify: true,
    sourcemap: "linked",
    // plotly.js-dist-min ships minified without a source map; its 4.8 MB would only bloat ours.
    sourcesContent: false,
    legalComments: "linked",
    metafile: true,
    logLevel: "warning",
  });
} catch (error) {
  rmSync(staging, { recursive: true, force: true });
  throw error;
}

// Which chunk holds plotly.js: the browser test checks the page loads it from there.
// (by suffix: a symlinked node_modules shows as its real path)
const plotlyInput = "node_modules/plotly.js-dist-min/plotly.min.js";
const plotlyChunk = Object.entries(result.metafile.outputs)
  .find(([, output]) => Object.keys(output.inputs || {}).some((path) => path.endsWith(plotlyInput)))?.[0];
if (!plotlyChunk) {
  throw new Error(`${plotlyInput} is in no output: no page script imports "plotly.js-dist-min"`);
}

const inputs = {};
for (const path of [...filesUnder(SOURCES), ...BUILD_FILES.map((name) => join(ROOT, name))].sort()) {
  inputs[posix(path)] = sha256(path);
}
const pkg = (name) => JSON.parse(readFileSync(join(ROOT, "node_modules", name, "package.json"), "utf8"));
const info = {
  plotly_js: pkg("plotly.js-dist-min").version,
  esbuild: esbuild.version,
  plotly_chunk: relative(staging, join(ROOT, plotlyChunk)).split(sep).join("/"),  // metafile paths: from ROOT
  entries: entryPoints.map((path) => posix(path)),
  inputs,
};
writeFileSync(join(staging, "build-info.json"), JSON.stringify(info, null, 2) + "\n");

rmSync(DIST, { recursive: true, force: true });
mkdirSync(dirname(DIST), { recursive: true });
renameSync(staging, DIST);
const bytes = Object.values(result.metafile.outputs).reduce((sum, output) => sum + output.bytes, 0);
console.log(`frontend/dist: ${entryPoints.length} entries, plotly.js ${info.plotly_js} in ${info.plotly_chunk}, `
  + `${(bytes / 1e6).toFixed(1)} MB (esbuild ${esbuild.version})`);
