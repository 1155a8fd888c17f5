// The tests' side of JavaScript grading (the driver), in a sandbox of its own.
// The host rewrote each `console.assert(` of the test source into
// `__crucibleAssert(<k>, ` so every assertion site is one test id, counted here:
// a site passes only if it ran and every run of it held. A thrown error stops the
// tests; sites never reached stay unreported, and the host fails them.
// fd 3: the job {"tests", "test_count", "names"}; fd 4: call requests to the submission;
// fd 5: its replies; fd 6: results, JSON lines {"event": "test", "id", "passed",
// "error"}, {"event": "load_error"|"submission_lost"} and a final {"event": "done"}.
function checkMain() {
  // Kept before anything else runs: the assertion bookkeeping never looks a global up.
  const isTrue = (value) => value === true;
  const Bool = Boolean;
  const job = JSON.parse(readAll(3));
  const replies = new LineReader(5);
  const emit = (fields) => writeAll(6, JSON.stringify(fields) + '\n');
  let lost = null;
  let loadError = null;
  const helloLine = replies.readLine();
  let hello;
  try {
    hello = helloLine === null ? { load_error: "the submission's process exited while loading" } : JSON.parse(helloLine);
  } catch (error) {
    hello = { load_error: "the submission's process sent no greeting" };
  }
  if (helloLine === null) emit({ event: 'submission_lost', error: hello.load_error });
  if (hello.load_error !== undefined) {
    loadError = String(hello.load_error).slice(0, 500);
    emit({ event: 'load_error', error: loadError });
  }
  const call = (name, args) => {
    if (lost) throw new Error(lost);
    try {
      writeAll(4, JSON.stringify({ name, args: encode(args) }) + '\n');
    } catch (error) {
      lost = "the submission's process exited";
      throw new Error(lost);
    }
    const line = replies.readLine();
    if (line === null) {
      lost = "the submission's process exited or sent a reply over the size limit";
      throw new Error(lost);
    }
    const reply = JSON.parse(line);
    if ('ok' in reply) return decode(reply.ok);
    const error = reply.error || {};
    throw new Error(String(error.message) + ' (raised by the program under test)');
  };
  const outcomes = new Array(job.test_count).fill(undefined);
  globalThis.__crucibleAssert = (id, condition) => {
    if (Number.isInteger(id) && id >= 0 && id < outcomes.length) outcomes[id] = outcomes[id] !== false && Bool(condition);
  };
  let stopped = null;
  if (loadError === null) {
    // Only the names the host expects (the entry point and the prompt's declarations),
    // and never one that already exists: the submission's list could name `Boolean`.
    const expected = new Set(job.names || []);
    const offered = new Set(Array.isArray(hello.functions) ? hello.functions : []);
    for (const name of expected) {
      if (offered.has(name) && /^[A-Za-z_$][\w$]*$/.test(name) && !(name in globalThis)) {
        globalThis[name] = (...args) => call(name, args);
      }
    }
    try {
      vm.runInThisContext(job.tests, { filename: 'tests.js' });
    } catch (error) {
      const { type, message } = describe(error);
      stopped = type + ': ' + message;
    }
  }
  for (let k = 0; k < outcomes.length; k++) {
    let error = '';
    if (loadError !== null) error = 'not run: ' + loadError;
    else if (outcomes[k] === undefined) error = 'not reached' + (stopped ? ': ' + stopped : '');
    else if (!outcomes[k]) error = 'console.assert failed';
    emit({ event: 'test', id: 'assert_' + k, passed: isTrue(outcomes[k]) && loadError === null, error: error.slice(0, 500) });
  }
  if (lost) emit({ event: 'submission_lost', error: lost });
  emit({ event: 'done' });
  // The submission's process reads EOF now, not when this process is gone (Node's exit
  // takes milliseconds): the two exit side by side.
  try {
    fs.closeSync(4);
  } catch (error) {
    // already gone: nothing to tell the submission's process
  }
  process.exit(0);
}

checkMain();
