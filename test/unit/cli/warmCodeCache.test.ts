// A command bundle's warm code cache (server/cli/warmCodeCache.ts): the first load compiles and, once the command
// is done, writes an entry (0600, in the private cache directory); the next load runs from it with the same
// exports; an edited bundle of the very same length (V8 checks only the length) runs its own code, never the
// entry of the old one, whose entry is then removed; without a private directory the bundle loads as before.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { requireCommandBundle, saveCommandBundleCaches } from '../../../server/cli/warmCodeCache';

/** A CommonJS "bundle" answering `word` from a function that runs only when called (V8 compiles it lazily). */
function bundleSource(word: string): string {
  return `"use strict";\nfunction answer() { return ${JSON.stringify(word)} + require('node:path').sep; }\nmodule.exports = { answer, file: __filename };\n`;
}

describe('cli: warm code cache of command bundles', () => {
  let work: string;
  let file: string;
  let dir: string;
  beforeEach(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'warm-cache-'));
    file = path.join(work, 'cli', 'demo.js');
    fs.mkdirSync(path.dirname(file));
    dir = path.join(work, 'cache', 'warm');
  });
  afterEach(() => {
    delete require.cache[file];
    fs.rmSync(work, { recursive: true, force: true });
  });

  /** Loads `file` afresh (as a new process would) and calls its function. */
  function load(cacheDir: string = dir): { load: string; answer: string } {
    delete require.cache[file];
    const { exports, load: how } = requireCommandBundle(file, cacheDir);
    const m = exports as { answer: () => string; file: string };
    assert.equal(m.file, file);
    assert.equal(require.cache[file]?.exports, exports, 'the bundle is in require.cache, as a require would put it');
    return { load: how, answer: m.answer() };
  }

  it('compiles the first time and writes the entry once the command is done; the next load runs from it', () => {
    fs.writeFileSync(file, bundleSource('alpha'));
    assert.deepEqual(load(), { load: 'miss', answer: `alpha${path.sep}` });
    assert.deepEqual(fs.existsSync(dir) ? fs.readdirSync(dir) : [], [], 'nothing is written before the command is done');
    saveCommandBundleCaches();
    const entries = fs.readdirSync(dir);
    assert.equal(entries.length, 1);
    assert.match(entries[0]!, /^demo-[0-9a-f]+-\d+-[0-9a-f]+$/);
    assert.equal(fs.statSync(path.join(dir, entries[0]!)).mode & 0o777, 0o600);
    assert.equal(fs.statSync(dir).mode & 0o777, 0o700);
    assert.deepEqual(load(), { load: 'hit', answer: `alpha${path.sep}` });
    saveCommandBundleCaches();
    assert.deepEqual(fs.readdirSync(dir), entries, 'a hit writes nothing');
  });

  it('an edited bundle of the same length runs its own code, and the old build\'s entry goes', () => {
    fs.writeFileSync(file, bundleSource('alpha'));
    load();
    saveCommandBundleCaches();
    const [old] = fs.readdirSync(dir);
    fs.writeFileSync(file, bundleSource('omega'));
    assert.equal(bundleSource('omega').length, bundleSource('alpha').length);
    assert.deepEqual(load(), { load: 'miss', answer: `omega${path.sep}` });
    saveCommandBundleCaches();
    const entries = fs.readdirSync(dir);
    assert.equal(entries.length, 1);
    assert.notEqual(entries[0], old);
    assert.deepEqual(load(), { load: 'hit', answer: `omega${path.sep}` });
  });

  it('without a private cache directory the bundle loads as a plain require', () => {
    fs.writeFileSync(file, bundleSource('alpha'));
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.chmodSync(dir, 0o777);
    assert.deepEqual(load(), { load: 'off', answer: `alpha${path.sep}` });
    saveCommandBundleCaches();
    assert.deepEqual(fs.readdirSync(dir), []);
  });

  it('a bundle that throws while loading is not cached, and throws again on the next load', () => {
    fs.writeFileSync(file, '"use strict";\nthrow new Error("broken bundle");\n');
    assert.throws(() => requireCommandBundle(file, dir), /broken bundle/);
    assert.equal(require.cache[file], undefined);
    assert.throws(() => requireCommandBundle(file, dir), /broken bundle/);
  });
});
