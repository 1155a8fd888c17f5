// The submission's side of JavaScript grading, in its own sandbox (see js_check.js for
// the tests' side). fd 3: the job {"program", "names", "files"} (read to EOF);
// fd 4: call requests {"name", "args"} from the tests, one JSON line each;
// fd 5: replies, first {"ready": true, "functions": [...]} or {"load_error"},
// then {"ok": <plain data>} or {"error": {"type", "message"}} per call.
function runnerMain() {
  const job = JSON.parse(readAll(3));
  writeFiles(job.files);
  const requests = new LineReader(4);
  const reply = (message) => writeAll(5, JSON.stringify(message) + '\n');
  const functions = {};
  try {
    vm.runInThisContext(job.program, { filename: job.filename || 'solution.js' });
    for (const name of job.names) {
      if (!/^[A-Za-z_$][\w$]*$/.test(name)) continue;
      let value;
      try {
        value = vm.runInThisContext(name);
      } catch (error) {
        continue;
      }
      if (typeof value === 'function') functions[name] = value;
    }
  } catch (error) {
    const { type, message } = describe(error);
    reply({ load_error: type + ': ' + message });
    process.exit(0);
  }
  reply({ ready: true, functions: Object.keys(functions) });
  for (;;) {
    const line = requests.readLine();
    if (line === null) break;
    let out;
    try {
      const request = JSON.parse(line);
      const fn = Object.prototype.hasOwnProperty.call(functions, request.name) ? functions[request.name] : null;
      if (!fn) throw new ReferenceError(String(request.name) + ' is not defined');
      out = { ok: encode(fn(...decode(request.args))) };
    } catch (error) {
      out = { error: describe(error) };
    }
    reply(out);
  }
  process.exit(0);
}

runnerMain();
