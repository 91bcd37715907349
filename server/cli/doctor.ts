// `sandbox-sessions doctor`: what works on this machine and, when something does not, why
// and what to do — the state directory, the local gateway daemon, kruntimes (the kubeconfig and
// its current context), and each sandbox backend with its declared isolation (probed for real,
// e.g. bwrap must create namespaces).
import fs from 'node:fs/promises';
import { localBackends } from '../sandboxes/localBackends';
import { defaultStateDir } from '../local/stateRoot';
import { findGateway } from '../gateway/daemonClient';
import { PassThrough } from 'node:stream';
import { createLogger } from '../log';
import { KruntimesSandboxProvider } from '../sandboxes/kruntimes/kruntimesProvider';
import { bool, type CommandHelp, flag, parseArgs, writeLine } from './args';
import type { CommandIo as CliIo } from './io';

export interface DoctorCheck {
  name: string;
  ok: boolean;
  detail: string;
  capabilities?: Record<string, unknown>;
}

async function checkStateDir(stateDir: string): Promise<DoctorCheck> {
  try {
    await fs.mkdir(stateDir, { recursive: true, mode: 0o700 });
    await fs.access(stateDir, fs.constants.W_OK);
    const st = await fs.stat(stateDir);
    const mode = st.mode & 0o777;
    return {
      name: 'state directory',
      ok: true,
      detail: `${stateDir} (mode ${mode.toString(8)}${mode & 0o077 ? '; others can read it: chmod 700 it' : ''})`,
    };
  } catch (err) {
    return { name: 'state directory', ok: false, detail: `${stateDir} is not writable: ${(err as Error).message}; set SANDBOX_SESSIONS_STATE_DIR` };
  }
}

/** kruntimes is optional: without a kubeconfig only local sandboxes exist (not a failure). */
async function checkKruntimes(): Promise<DoctorCheck> {
  const provider = new KruntimesSandboxProvider({ log: createLogger(new PassThrough(), 'error') });
  try {
    const info = await provider.info();
    const current = info.contexts.find((c) => c.current);
    if (info.contexts.length === 0) return { name: 'kruntimes', ok: false, detail: info.reason ?? 'no kubeconfig' };
    const where = `${info.label}, current context ${current?.name ?? 'none'}`;
    return info.available
      ? { name: 'kruntimes', ok: true, detail: `${where}; Runtimes: ${info.runtimes.map((r) => r.name).join(', ') || 'none in its namespace'}` }
      : { name: 'kruntimes', ok: false, detail: `${where}: ${info.reason ?? 'unavailable'}` };
  } finally {
    await provider.dispose();
  }
}

export async function doctorChecks(stateDir: string): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [
    { name: 'node', ok: true, detail: `${process.version} at ${process.execPath}` },
    await checkStateDir(stateDir),
  ];
  const gw = await findGateway(stateDir);
  checks.push({
    name: 'local gateway',
    ok: true,
    detail: gw ? `running at ${gw.url} (pid ${gw.pid})` : 'not running (it starts on demand; or run `sandbox-sessions gateway --detach`)',
  });
  checks.push(await checkKruntimes());
  for (const backend of localBackends(stateDir).values()) {
    const probe = await backend.probe();
    checks.push({
      name: `backend ${backend.name}`,
      ok: probe.ok,
      detail: probe.ok ? `${probe.detail} — ${backend.description}` : probe.reason,
      capabilities: { ...backend.capabilities },
    });
  }
  return checks;
}

const USAGE = 'usage: sandbox-sessions doctor [--json] [--state-dir DIR]';
export const DOCTOR_HELP: CommandHelp = { usage: USAGE };

export async function runDoctorCommand(argv: string[], io: CliIo): Promise<number> {
  let args;
  try {
    args = parseArgs(argv, { booleans: ['json'], values: ['state-dir'] });
  } catch (err) {
    writeLine(io.stderr, `error: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const checks = await doctorChecks(flag(args, 'state-dir') ?? defaultStateDir());
  if (bool(args, 'json')) writeLine(io.stdout, JSON.stringify({ checks }));
  else for (const c of checks) writeLine(io.stdout, `${c.ok ? 'ok  ' : 'FAIL'}  ${c.name}: ${c.detail}`);
  const anyBackend = checks.some((c) => c.name.startsWith('backend ') && c.ok);
  const optional = (c: DoctorCheck) => c.name.startsWith('backend ') || c.name === 'kruntimes';
  return checks.every((c) => c.ok || optional(c)) && anyBackend ? 0 : 1;
}
