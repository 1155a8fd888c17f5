// Plain-data codec and synchronous pipe I/O shared by the JavaScript harness programs.
// Only exact plain values cross between a submission and its tests: null, booleans,
// strings, numbers (NaN, the infinities and -0 tagged), undefined, BigInt, arrays and
// objects whose prototype is Object.prototype or null. Anything else (a class
// instance, a function, a Proxy-backed Map) is refused, so the tests only ever
// compare values they built themselves. Node's standard library only: this source is
// prepended to js_runner.js / js_check.js and passed to `node -e`.
'use strict';
const fs = require('fs');
const vm = require('vm');
const path = require('path');

const PLAIN_MAX_DEPTH = 64;
const MAX_LINE_BYTES = 16 * 1024 * 1024;

function encode(value, depth = 0) {
  if (depth > PLAIN_MAX_DEPTH) throw new TypeError('value nests deeper than ' + PLAIN_MAX_DEPTH + ' levels');
  if (value === null) return null;
  switch (typeof value) {
    case 'boolean':
    case 'string':
      return value;
    case 'number':
      if (Number.isFinite(value)) return Object.is(value, -0) ? { $n: '-0' } : value;
      return { $n: String(value) };
    case 'undefined':
      return { $u: 1 };
    case 'bigint':
      return { $b: value.toString() };
    default:
  }
  if (Array.isArray(value)) {
    const out = [];
    for (let i = 0; i < value.length; i++) out.push(encode(value[i], depth + 1));
    return out;
  }
  const proto = typeof value === 'object' ? Object.getPrototypeOf(value) : undefined;
  if (proto === Object.prototype || proto === null) {
    const out = {};
    for (const key of Object.keys(value)) out[key] = encode(value[key], depth + 1);
    return { $o: out };
  }
  throw new TypeError('not plain data: ' + Object.prototype.toString.call(value));
}

function decode(data) {
  if (data === null || typeof data === 'boolean' || typeof data === 'string' || typeof data === 'number') return data;
  if (Array.isArray(data)) return data.map(decode);
  if (typeof data === 'object') {
    if (typeof data.$n === 'string') return data.$n === '-0' ? -0 : Number(data.$n);
    if ('$u' in data) return undefined;
    if (typeof data.$b === 'string') return BigInt(data.$b);
    if (data.$o && typeof data.$o === 'object') {
      const out = {};
      for (const key of Object.keys(data.$o)) {
        // defineProperty: a key named "__proto__" stays a key, never a prototype.
        Object.defineProperty(out, key, { value: decode(data.$o[key]), enumerable: true, writable: true, configurable: true });
      }
      return out;
    }
  }
  throw new TypeError('malformed plain data');
}

function readAll(fd) {
  const chunks = [];
  const buffer = Buffer.alloc(65536);
  for (;;) {
    const n = fs.readSync(fd, buffer, 0, buffer.length, null);
    if (n === 0) break;
    chunks.push(Buffer.from(buffer.subarray(0, n)));
  }
  return Buffer.concat(chunks).toString('utf8');
}

function writeAll(fd, text) {
  const bytes = Buffer.from(text, 'utf8');
  let offset = 0;
  while (offset < bytes.length) offset += fs.writeSync(fd, bytes, offset, bytes.length - offset);
}

class LineReader {
  constructor(fd) {
    this.fd = fd;
    this.pending = Buffer.alloc(0);
  }

  // The next line without its newline, or null at EOF, on an error or past MAX_LINE_BYTES.
  readLine() {
    for (;;) {
      const end = this.pending.indexOf(10);
      if (end >= 0) {
        const line = this.pending.subarray(0, end).toString('utf8');
        this.pending = this.pending.subarray(end + 1);
        return line;
      }
      if (this.pending.length > MAX_LINE_BYTES) return null;
      const buffer = Buffer.alloc(65536);
      let n;
      try {
        n = fs.readSync(this.fd, buffer, 0, buffer.length, null);
      } catch (error) {
        return null;
      }
      if (n === 0) return null;
      this.pending = Buffer.concat([this.pending, buffer.subarray(0, n)]);
    }
  }
}

function describe(error) {
  const type = error && error.constructor && typeof error.constructor.name === 'string' ? error.constructor.name : typeof error;
  const message = error && typeof error.message === 'string' ? error.message : String(error);
  return { type: type.slice(0, 100), message: message.slice(0, 500) };
}

function writeFiles(files) {
  for (const [rel, text] of Object.entries(files || {})) {
    fs.mkdirSync(path.dirname(rel), { recursive: true });
    fs.writeFileSync(rel, text);
  }
}

// Run the hot paths once while the tree waits for its job, so V8 has compiled them
// (lazily, on first call) before the clock of an execution starts.
(function warmUp() {
  const sample = { a: [1, 'x', null, 1.5, -0, NaN, undefined, true], b: { c: 2 } };
  for (let i = 0; i < 50; i++) decode(JSON.parse(JSON.stringify(encode(sample))));
  Buffer.concat([Buffer.from('warm\n'), Buffer.alloc(4)]).indexOf(10);
  vm.runInThisContext('(function () { return [1, 2, 3].map((x) => x * 2) })()', { filename: 'warm-up.js' });
  describe(new Error('warm'));
})();
