// `sandbox-sessions gateway`: runs the local gateway daemon in the foreground (one per user:
// a second start finds the first and exits 0), `--detach` starts it in the background and
// returns once its state file is healthy, `--stop` stops it, `--status` reports it.
// `--api era-d` serves only the routes of an era-D kruntimes gateway (spec §10.2).
import { GatewayApiSchema, type GatewayApi } from '../gateway/apiEra';
import { startGateway } from '../gateway/daemon';
import { acquireDaemonLock } from '../gateway/daemonLock';
import { findGateway, startDetachedGateway, stopGateway, defaultGatewayCommand } from '../gateway/daemonClient';
import { defaultStateDir, StateLayout } from '../local/stateRoot';
import { localBackends } from '../sandboxes/localBackends';
import { bool, type CommandHelp, flag, parseArgs, UsageError, writeLine } from './args';
import type { CommandIo } from './io';

export type CliIo = CommandIo;

const USAGE = `usage: sandbox-sessions gateway [--detach | --stop | --status] [--state-dir DIR] [--port N] [--api era-c|era-d] [--json]
  (no flag)   run the local gateway daemon in the foreground until SIGTERM/SIGINT
  --detach    start it in the background; returns when it is healthy
  --stop      stop the running daemon
  --status    say whether it runs, where, and which API it serves
  --api       era-c (default): every access API route and the local extensions;
              era-d: only status, operations:ws and files, as an era-D kruntimes gateway
              (a daemon of the other era needs another --state-dir)`;

export const GATEWAY_HELP: CommandHelp = { usage: USAGE };

export async function runGatewayCommand(argv: string[], io: CliIo, opts: { command?: string[] } = {}): Promise<number> {
  let args;
  try {
    args = parseArgs(argv, { booleans: ['detach', 'stop', 'status', 'json'], values: ['state-dir', 'port', 'api'] });
    const extra = args.positionals[0];
    if (extra !== undefined) {
      // `gateway stop` reads like `sandbox close`: name the flag that does it.
      const hint = ['detach', 'stop', 'status'].includes(extra) ? ` (did you mean \`gateway --${extra}\`?)` : '';
      throw new UsageError(`unexpected argument ${extra}${hint}`);
    }
  } catch (err) {
    writeLine(io.stderr, `error: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const stateDir = flag(args, 'state-dir') ?? defaultStateDir();
  const json = bool(args, 'json');
  const portText = flag(args, 'port');
  const port = portText === undefined ? undefined : Number(portText);
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535)) {
    writeLine(io.stderr, `error: --port must be 0..65535`);
    return 2;
  }
  const apiText = flag(args, 'api');
  const apiParsed = GatewayApiSchema.safeParse(apiText ?? 'era-c');
  if (!apiParsed.success) {
    writeLine(io.stderr, `error: --api must be era-c or era-d, not ${apiText}`);
    return 2;
  }
  const api = apiParsed.data;
  const say = (text: string, value: Record<string, unknown>): void => writeLine(io.stdout, json ? JSON.stringify(value) : text);
  /** A running daemon of another era than the one asked for (only when --api was given). */
  const mismatch = (found: { api: GatewayApi; pid: number }): boolean => {
    if (apiText === undefined || found.api === api) return false;
    writeLine(io.stderr, `error: the gateway of ${stateDir} (pid ${found.pid}) serves ${found.api}, not ${api}; stop it or use another --state-dir`);
    return true;
  };

  if (bool(args, 'stop')) {
    const stopped = await stopGateway({ stateDir });
    say(stopped ? 'gateway stopped' : 'gateway is not running', { stopped });
    return 0;
  }
  if (bool(args, 'status')) {
    const found = await findGateway(stateDir);
    say(
      found ? `gateway running: ${found.url} (pid ${found.pid}), api ${found.api}` : 'gateway is not running',
      found ? { running: true, url: found.url, pid: found.pid, api: found.api } : { running: false },
    );
    return found ? 0 : 1;
  }
  const existing = await findGateway(stateDir);
  if (existing) {
    if (mismatch(existing)) return 1;
    say(`gateway already running: ${existing.url} (pid ${existing.pid}), api ${existing.api}`, { running: true, url: existing.url, pid: existing.pid, api: existing.api, started: false });
    return 0;
  }
  if (bool(args, 'detach')) {
    try {
      const started = await startDetachedGateway({
        stateDir,
        command: opts.command ?? defaultGatewayCommand(),
        args: ['--state-dir', stateDir, '--api', api, ...(port !== undefined ? ['--port', String(port)] : [])],
      });
      if (mismatch(started)) return 1; // another start of the other era won the race
      say(`gateway running: ${started.url} (pid ${started.pid}), api ${started.api}`, { running: true, url: started.url, pid: started.pid, api: started.api, started: true });
      return 0;
    } catch (err) {
      writeLine(io.stderr, `error: ${(err as Error).message}`);
      return 1;
    }
  }
  return runForeground(stateDir, port, api, io, say, mismatch);
}

async function runForeground(
  stateDir: string,
  port: number | undefined,
  api: GatewayApi,
  io: CliIo,
  say: (text: string, value: Record<string, unknown>) => void,
  mismatch: (found: { api: GatewayApi; pid: number }) => boolean,
): Promise<number> {
  const layout = new StateLayout(stateDir);
  const log = (line: string): void => writeLine(io.stderr, `${new Date().toISOString()} gateway: ${line}`);
  const { mkdir } = await import('node:fs/promises');
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  // Another daemon may hold the lock: running, starting, or stopping (it releases the lock only
  // after its server closed). Until a deadline, poll both: name the daemon once it answers, or
  // take the lock as soon as a stopping one lets it go — a start that meets a stop then starts.
  const deadline = Date.now() + 15_000;
  let lock = await acquireDaemonLock(layout.gatewayLockFile);
  if (!lock.acquired) log(`pid ${lock.owner.pid} holds ${layout.gatewayLockFile}: waiting up to 15 s for it to answer or let go`);
  while (!lock.acquired) {
    const found = await findGateway(stateDir);
    if (found) {
      if (mismatch(found)) return 1;
      say(`gateway already running: ${found.url} (pid ${found.pid}), api ${found.api}`, { running: true, url: found.url, pid: found.pid, api: found.api, started: false });
      return 0;
    }
    if (Date.now() >= deadline) {
      writeLine(io.stderr, `error: gateway pid ${lock.owner.pid} holds ${layout.gatewayLockFile} but is not healthy; stop it or remove the lock`);
      return 1;
    }
    await new Promise((r) => setTimeout(r, 50));
    lock = await acquireDaemonLock(layout.gatewayLockFile);
  }
  let gateway;
  try {
    gateway = await startGateway({ stateDir, port, api, writeStateFile: true, log, backends: localBackends(stateDir) });
  } catch (err) {
    await lock.release();
    writeLine(io.stderr, `error: cannot start the gateway: ${(err as Error).message}`);
    return 1;
  }
  log(`listening on ${gateway.url} (pid ${process.pid}, api ${api}, state ${layout.gatewayStateFile})`);
  say(`gateway running: ${gateway.url} (pid ${process.pid}), api ${api}`, { running: true, url: gateway.url, pid: process.pid, api, started: true });
  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onInt);
      log(`${signal}: stopping`);
      resolve();
    };
    const onTerm = (): void => stop('SIGTERM');
    const onInt = (): void => stop('SIGINT');
    process.on('SIGTERM', onTerm);
    process.on('SIGINT', onInt);
  });
  const hardStop = setTimeout(() => {
    log('shutdown took longer than 10 s; exiting');
    process.exit(1);
  }, 10_000);
  hardStop.unref();
  await gateway.close();
  await lock.release();
  clearTimeout(hardStop);
  log('stopped');
  return 0;
}
