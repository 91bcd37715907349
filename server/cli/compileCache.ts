// V8's compile cache for the CLI (module.enableCompileCache, Node >= 22.1): a command's bundle is 1–5 MB of
// JavaScript that every call would parse and compile again before doing anything; with the cache, a call
// after the first reads the compiled code back instead (bench/cliStart.ts, issue 25). The cache lives in
// the user's own cache directory (0700, checked to be ours), never the shared temp dir that Node's default
// would use; when it cannot be had (no home, unwritable, someone else's directory) the CLI runs without it.
import fs from 'node:fs';
import nodeModule from 'node:module';
import os from 'node:os';
import path from 'node:path';

/** `$XDG_CACHE_HOME/sandbox-sessions/compile-cache`, else `~/.cache/…`; undefined without an absolute base. */
export function compileCacheDir(env: NodeJS.ProcessEnv = process.env, home: string = os.homedir()): string | undefined {
  const xdg = env.XDG_CACHE_HOME;
  const base = xdg && path.isAbsolute(xdg) ? xdg : home && path.isAbsolute(home) ? path.join(home, '.cache') : undefined;
  return base === undefined ? undefined : path.join(base, 'sandbox-sessions', 'compile-cache');
}

/**
 * Turns the compile cache on for this process (the modules it loads from now on), in `dir`: created 0700 if
 * missing, and used only if it is a real directory of this user that nobody else may write. Answers whether
 * the cache is on; never throws (a CLI without its cache is only slower).
 */
export function enableCompileCache(dir: string | undefined = compileCacheDir()): boolean {
  if (dir === undefined || typeof nodeModule.enableCompileCache !== 'function') return false;
  try {
    if (!privateCacheDir(dir)) return false;
    const { status } = nodeModule.enableCompileCache(dir);
    return status === nodeModule.constants.compileCacheStatus.ENABLED || status === nodeModule.constants.compileCacheStatus.ALREADY_ENABLED;
  } catch {
    return false;
  }
}

/** Whether `dir` (created 0700 if missing) is a real directory of this user that nobody else may write; never throws. */
export function privateCacheDir(dir: string): boolean {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = fs.lstatSync(dir);
    const uid = process.getuid?.();
    return st.isDirectory() && (uid === undefined || st.uid === uid) && (st.mode & 0o077) === 0;
  } catch {
    return false;
  }
}
