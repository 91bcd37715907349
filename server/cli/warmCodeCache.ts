// The code cache of a command's bundle, taken once the command has run (issue 25). Node's compile cache
// (compileCache.ts) keeps a bundle's code as compiled when it was loaded; V8 compiles most functions only when
// they first run, so every call still compiled zod's and the command's functions again (about a fifth of a
// `sandbox exec`'s CPU, bench/cliStart.ts). Here dist/server.js compiles a command bundle with vm.Script and,
// after the command, writes the script's code cache — now with every function the call ran — into the user's
// private cache directory. An entry is named by the bundle's CRC-32 and length and by Node's version, platform
// and flags: V8 itself checks only the source's length, so an edited bundle is never served old code. Never in
// the way: without a usable directory, or on any failure to read or write an entry, the bundle loads as before.
import fs from 'node:fs';
import nodeModule from 'node:module';
import path from 'node:path';
import vm from 'node:vm';
import { compileCacheDir, privateCacheDir } from './compileCache';

/** `<compile cache>/warm`, next to Node's own entries (undefined without a cache directory). */
export function warmCacheDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const base = compileCacheDir(env);
  return base === undefined ? undefined : path.join(base, 'warm');
}

/** How the bundle was loaded: from a cache entry, compiled afresh (an entry is written on save), as a plain require, or earlier. */
export type WarmLoad = 'hit' | 'miss' | 'off' | 'loaded';

/** Entries to write once the command is done. */
const pending: (() => void)[] = [];

/** The entry's file name: the bundle's name, its CRC-32 and length (`build`), and what else V8's code depends on. */
function entryName(file: string, source: string): { bundle: string; build: string; name: string } {
  // zlib only here, when a command bundle is loaded: not for the daemon or `--help`.
  const zlib = process.getBuiltinModule('node:zlib');
  const bundle = `${path.basename(file, '.js')}-`;
  const build = `${bundle}${zlib.crc32(source).toString(16)}-${source.length}-`;
  const runtime = zlib.crc32(`${process.version} ${process.platform} ${process.arch} ${process.execArgv.join(' ')}`);
  return { bundle, build, name: `${build}${runtime.toString(16)}` };
}

/**
 * Loads the CommonJS bundle `file` (an absolute path) like `require` does — once per process, in require.cache —
 * with its code cache from `dir` when there is one. Answers the module's exports and how it was loaded.
 */
export function requireCommandBundle(file: string, dir: string | undefined = warmCacheDir()): { exports: unknown; load: WarmLoad } {
  const require = nodeModule.createRequire(file);
  const loaded = require.cache[file];
  if (loaded) return { exports: loaded.exports, load: 'loaded' };
  if (dir === undefined || typeof process.getBuiltinModule('node:zlib').crc32 !== 'function' || !privateCacheDir(dir)) return { exports: require(file), load: 'off' };
  const source = fs.readFileSync(file, 'utf8'); // one copy of the 1–5 MB source: V8 keeps this string
  const names = entryName(file, source);
  const entry = path.join(dir, names.name);
  let cachedData: Buffer | undefined;
  try {
    cachedData = fs.readFileSync(entry);
  } catch {
    cachedData = undefined; // none yet
  }
  const script = new vm.Script(nodeModule.wrap(source), {
    filename: file,
    ...(cachedData ? { cachedData } : {}),
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  const mod = new nodeModule(file);
  mod.filename = file;
  require.cache[file] = mod;
  try {
    const wrapper = script.runInThisContext() as (exports: unknown, req: NodeJS.Require, module: NodeJS.Module, filename: string, dirname: string) => void;
    wrapper.call(mod.exports, mod.exports, require, mod, file, path.dirname(file));
  } catch (err) {
    delete require.cache[file]; // as require does: a module that threw is not cached
    throw err;
  }
  mod.loaded = true;
  const hit = cachedData !== undefined && !script.cachedDataRejected;
  if (!hit) pending.push(() => writeEntry(dir, entry, names, script.createCachedData()));
  return { exports: mod.exports, load: hit ? 'hit' : 'miss' };
}

/** Writes the entry (atomically, 0600) and removes those of the bundle's earlier builds; failures are ignored. */
function writeEntry(dir: string, entry: string, { bundle, build }: { bundle: string; build: string }, data: Buffer): void {
  const tmp = `${entry}.${process.pid}.tmp`;
  try {
    fs.writeFileSync(tmp, data, { mode: 0o600, flag: 'wx' });
    fs.renameSync(tmp, entry);
    for (const name of fs.readdirSync(dir)) {
      if (name.startsWith(bundle) && !name.startsWith(build) && !name.endsWith('.tmp')) fs.rmSync(path.join(dir, name), { force: true });
    }
  } catch {
    fs.rmSync(tmp, { force: true });
  }
}

/** Writes the code caches of the bundles loaded without one: called once the command is done (its code has run). */
export function saveCommandBundleCaches(): void {
  for (const save of pending.splice(0)) save();
}
