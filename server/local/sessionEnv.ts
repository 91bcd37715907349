// The environment of a command: the daemon's environment filtered to what a shell needs
// (never its secrets or our own settings), then the Run's env (kruntimes uses only `value`;
// `valueFrom` becomes ""), then `KRUNTIME_ARTIFACTS_DIR`, then the command's env.
import type { EnvVar } from '../../protocol/kruntimes/run';

const PASSED_THROUGH = new Set(['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LANGUAGE', 'TZ', 'TERM', 'TMPDIR']);

export function filteredDaemonEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) continue;
    if (PASSED_THROUGH.has(k) || k.startsWith('LC_')) out[k] = v;
  }
  out.PATH ??= '/usr/local/bin:/usr/bin:/bin';
  return out;
}

export function sessionEnv(base: Record<string, string>, runEnv: EnvVar[] | undefined, artifactsDir: string): Record<string, string> {
  const out = { ...base };
  for (const e of runEnv ?? []) out[e.name] = e.value ?? '';
  out.KRUNTIME_ARTIFACTS_DIR = artifactsDir;
  return out;
}
