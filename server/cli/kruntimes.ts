// `sandbox-sessions kruntimes <verb>`: kruntimes sandboxes (session Runs on Kubernetes) from a
// shell, through the same provider the editor uses — contexts, list, create (refused for a Runtime
// the namespace lacks), get, exec (the command's exit code is the CLI's, as with `sandbox exec`), close
// (Drain, or --immediate), delete, artifacts, logs (runtimed's log of the Run, like `kubectl logs`),
// port-forward (portForward.ts, like `kubectl port-forward`) — with `--json` for scripts. The kubeconfig is
// found as kubectl finds it (KUBECONFIG, ~/.kube/config, in-cluster); `--context` picks one.
import path from 'node:path';
import { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { ProviderInfo, SandboxRef, SandboxSummary } from '../../protocol/sandboxes';
import { createLogger } from '../log';
import { KruntimesSandboxProvider } from '../sandboxes/kruntimes/kruntimesProvider';
import { SandboxError } from '../sandboxes/provider';
import { bool, type CommandHelp, flag, parseVerb, positiveIntFlag, UsageError, verbHelp, writeLine, type ParsedArgs } from './args';
import { COMMAND_NOT_FOUND_EXIT_CODE, commandExitCode, commandNotFound, INTERRUPTED_EXIT_CODE } from './commandExitCode';
import { logQuery, readLogUntilInterrupt, withKubectlFollow } from './logFlags';
import { parsePortSpec, PORT_FORWARD_SYNOPSIS, runPortForward } from './portForward';
import { portForwardService } from '../ports/portSubstrates';
import type { CommandIo } from './io';
import { exitCodeFor } from '../errorMapping';

/** Every verb of `kruntimes`, with its synopsis (the help text); the dispatcher accepts only these. */
const VERBS = {
  contexts: 'contexts',
  list: 'list',
  create: 'create --runtime RUNTIME [--name N] [--idle-timeout S] [--lease-timeout S] [--timeout DUR] [--env K=V]... [--no-wait]',
  get: 'get NAME',
  exec: `exec NAME [--shell CMD | -- ARGV...] [--workdir DIR] [--timeout-ms N]
    exits with the command's exit code (124: it timed out; 130: Ctrl+C cancelled it)`,
  close: 'close NAME [--immediate] [--no-wait]',
  delete: 'delete NAME',
  artifacts: 'artifacts NAME --output DIR [--unpack]',
  logs: 'logs NAME [-f|--follow] [--tail N] [--since DUR | --since-time RFC3339] [--timestamps]',
  'port-forward': PORT_FORWARD_SYNOPSIS,
} as const;
type Verb = keyof typeof VERBS;

export const KRUNTIMES_HELP: CommandHelp = verbHelp(
  'kruntimes',
  VERBS,
  "common: --context CTX (default: the current context), --namespace NS (default: the context's), --json",
);
const USAGE = KRUNTIMES_HELP.usage;

const BOOLEANS = ['json', 'no-wait', 'immediate', 'unpack', 'follow', 'timestamps'];
const VALUES = ['context', 'namespace', 'runtime', 'name', 'idle-timeout', 'lease-timeout', 'timeout', 'env', 'shell', 'workdir', 'timeout-ms', 'output', 'tail', 'since', 'since-time'];

/** What ends the sandbox besides Drain/Cancel, e.g. `lease=300s,timeout=8h` (`-` for nothing). */
export function lifetimeColumn(s: SandboxSummary): string {
  const parts = [
    ...(s.idleTimeoutSeconds !== undefined ? [`idle=${s.idleTimeoutSeconds}s`] : []),
    ...(s.leaseTimeoutSeconds !== undefined ? [`lease=${s.leaseTimeoutSeconds}s`] : []),
    ...(s.timeout ? [`timeout=${s.timeout}`] : []),
  ];
  return parts.length > 0 ? parts.join(',') : '-';
}

function row(s: SandboxSummary): string {
  return [s.ref.namespace, s.ref.name, s.runtime, s.phase ?? 'Pending', lifetimeColumn(s), s.message ?? ''].join('\t');
}

/** `env`: where KUBECONFIG/HOME are read (default: this process's environment). */
export async function runKruntimesCommand(argv: string[], io: CommandIo, opts: { env?: NodeJS.ProcessEnv } = {}): Promise<number> {
  const parsed = parseVerb(withKubectlFollow(argv), USAGE, { booleans: BOOLEANS, values: VALUES }, io.stderr);
  if ('exitCode' in parsed) return parsed.exitCode;
  const { args } = parsed;
  const verb = parsed.verb as Verb;
  const json = bool(args, 'json');
  const out = (text: string, value: unknown): void => writeLine(io.stdout, json ? JSON.stringify(value) : text);
  const provider = new KruntimesSandboxProvider({ log: createLogger(io.stderr, 'warn'), ...(opts.env ? { env: opts.env } : {}) });
  const progress = json ? undefined : (_phase: string, message?: string) => message && writeLine(io.stderr, message);
  try {
    const info = async () => {
      const i = await provider.info();
      // No kubeconfig is not a mistake in the command line: say what to set up, without the usage.
      if (i.contexts.length === 0) throw new SandboxError('provider_unavailable', i.reason ?? 'the kubeconfig has no contexts');
      return i;
    };
    const contextName = flag(args, 'context');
    const where = async (): Promise<{ context: string; namespace: string }> => {
      const i = await info();
      const ctx = contextName ? i.contexts.find((c) => c.name === contextName) : (i.contexts.find((c) => c.current) ?? i.contexts[0]);
      if (!ctx) throw new UsageError(`kubeconfig has no context "${contextName}" (contexts: ${i.contexts.map((c) => c.name).join(', ')})`);
      return { context: ctx.name, namespace: flag(args, 'namespace') ?? ctx.namespace ?? 'default' };
    };
    const ref = async (): Promise<SandboxRef> => {
      const name = args.positionals[0];
      if (!name) throw new UsageError(`${verb} needs a sandbox NAME`);
      return { provider: 'kruntimes', ...(await where()), name };
    };
    if (!Object.hasOwn(VERBS, verb)) throw new UsageError(`unknown command "${verb}"`);
    return await VERB_RUNNERS[verb]({ args, io, json, out, provider, progress, info, where, ref });
  } catch (err) {
    if (err instanceof UsageError) {
      writeLine(io.stderr, `error: ${err.message}\n${USAGE}`);
      return exitCodeFor(err);
    }
    const missing = verb === 'exec' ? commandNotFound(err) : undefined;
    if (missing !== undefined) {
      // As a shell says it, and with its exit code: the program is not in the sandbox.
      writeLine(io.stderr, `error: ${missing}: command not found in sandbox ${args.positionals[0] ?? ''}`);
      return COMMAND_NOT_FOUND_EXIT_CODE;
    }
    const code = (err as { code?: unknown }).code;
    writeLine(io.stderr, `error${typeof code === 'string' ? ` (${code})` : ''}: ${(err as Error).message}`);
    return exitCodeFor(err);
  } finally {
    await provider.dispose();
  }
}

/** What every verb works with: the parsed flags, where to write, the provider, and the sandbox the flags name. */
interface KruntimesVerbContext {
  args: ParsedArgs;
  io: CommandIo;
  json: boolean;
  /** Writes `text`, or `value` as JSON with --json. */
  out(text: string, value: unknown): void;
  provider: KruntimesSandboxProvider;
  /** Progress lines on stderr (none with --json). */
  progress: ((phase: string, message?: string) => unknown) | undefined;
  /** The kubeconfig's contexts, or a usage error when there are none. */
  info(): Promise<ProviderInfo>;
  /** The context and namespace the flags pick. */
  where(): Promise<{ context: string; namespace: string }>;
  /** The sandbox NAME names, in that context and namespace. */
  ref(): Promise<SandboxRef>;
}

async function contextsVerb(c: KruntimesVerbContext): Promise<number> {
  const { out, info } = c;
  const i = await info();
  out(i.contexts.map((c) => `${c.current ? '*' : ' '} ${c.name}\t${c.namespace ?? ''}\t${c.namespaces.join(',')}`).join('\n'), i.contexts);
  return 0;
}

async function listVerb(c: KruntimesVerbContext): Promise<number> {
  const { out, provider, where } = c;
  const { context, namespace } = await where();
  const list = await provider.list({ context, namespace });
  out(list.map(row).join('\n'), list);
  return 0;
}

async function createVerb(c: KruntimesVerbContext): Promise<number> {
  const { args, out, provider, progress, where } = c;
  const runtime = flag(args, 'runtime');
  if (!runtime) throw new UsageError('create needs --runtime (a Runtime of the namespace)');
  const env: Record<string, string> = {};
  for (const kv of args.flags.get('env') ?? []) {
    const i = kv.indexOf('=');
    if (i <= 0) throw new UsageError(`--env needs NAME=VALUE, got ${kv}`);
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  const idle = positiveIntFlag(args, 'idle-timeout');
  const lease = positiveIntFlag(args, 'lease-timeout');
  const name = flag(args, 'name');
  const timeout = flag(args, 'timeout');
  const s = await provider.create(
    {
      provider: 'kruntimes',
      ...(await where()),
      runtime,
      ...(name ? { name } : {}),
      ...(idle !== undefined ? { idleTimeoutSeconds: idle } : {}),
      ...(lease !== undefined ? { leaseTimeoutSeconds: lease } : {}),
      ...(timeout ? { timeout } : {}),
      ...(Object.keys(env).length ? { env } : {}),
    },
    { waitForReady: !bool(args, 'no-wait'), ...(progress ? { progress } : {}) },
  );
  out(row(s), s);
  return 0;
}

async function getVerb(c: KruntimesVerbContext): Promise<number> {
  const { out, provider, ref } = c;
  const { sandbox } = await provider.get(await ref());
  out(row(sandbox), sandbox);
  return 0;
}

/** Runs the command and exits with its exit code, as `sandbox exec` does (commandExitCode.ts); Ctrl+C cancels it (130). */
async function execVerb(c: KruntimesVerbContext): Promise<number> {
  const { args, io, json, out, provider, ref } = c;
  // Checked before anything is reached: a wrong command line changes nothing.
  const shell = flag(args, 'shell');
  if (!shell && args.rest.length === 0) throw new UsageError('exec needs --shell CMD or -- ARGV...');
  const workdir = flag(args, 'workdir');
  const timeoutMs = positiveIntFlag(args, 'timeout-ms', 'milliseconds');
  const connection = await provider.open(await ref());
  const client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token, tls: connection.tls });
  // Ctrl+C aborts the call, which cancels the command in the sandbox (era C closes the request, era D sends `cancel`).
  const interrupt = new AbortController();
  const onSigint = (): void => interrupt.abort();
  process.once('SIGINT', onSigint);
  try {
    const command = { ...(shell ? { shell } : { argv: args.rest }), ...(workdir ? { workingDirectory: workdir } : {}), ...(timeoutMs !== undefined ? { timeoutMillis: timeoutMs } : {}) };
    const r = await client.runCommand(command, { signal: interrupt.signal }).catch((err: unknown) => {
      if (interrupt.signal.aborted) return undefined;
      throw err;
    });
    if (!r) return INTERRUPTED_EXIT_CODE;
    if (json) out('', { exitCode: r.exitCode, stdout: r.stdout.toString('utf8'), stderr: r.stderr.toString('utf8'), timedOut: r.timedOut });
    else {
      io.stdout.write(r.stdout);
      io.stderr.write(r.stderr);
    }
    return commandExitCode(r, interrupt.signal.aborted);
  } finally {
    process.off('SIGINT', onSigint);
    await client.close();
  }
}

async function closeVerb(c: KruntimesVerbContext): Promise<number> {
  const { args, out, provider, progress, ref } = c;
  const s = await provider.terminate(await ref(), bool(args, 'immediate') ? 'Immediate' : 'Drain', { wait: !bool(args, 'no-wait'), ...(progress ? { progress } : {}) });
  out(row(s), s);
  return 0;
}

async function deleteVerb(c: KruntimesVerbContext): Promise<number> {
  const { out, provider, ref } = c;
  const r = await ref();
  await provider.delete(r);
  out(`deleted ${r.namespace}/${r.name}`, { deleted: r });
  return 0;
}

async function artifactsVerb(c: KruntimesVerbContext): Promise<number> {
  const { args, out, provider, progress, ref } = c;
  const output = flag(args, 'output');
  if (!output) throw new UsageError('artifacts needs --output DIR (an absolute or relative folder)');
  const list = await provider.downloadArtifacts(await ref(), path.resolve(output), { unpack: bool(args, 'unpack'), ...(progress ? { progress } : {}) });
  out(list.map((a) => `${a.name}\t${a.type}\t${a.sizeBytes}\t${a.digest}\t${a.unpackedTo ?? a.path}`).join('\n'), list);
  return 0;
}

async function logsVerb(c: KruntimesVerbContext): Promise<number> {
  const { args, io, provider, ref } = c;
  const r = await ref();
  const query = logQuery(args);
  return readLogUntilInterrupt(query.follow === true, (signal) => provider.logs(r, query, (line) => writeLine(io.stdout, line), signal));
}

async function portForwardVerb(c: KruntimesVerbContext): Promise<number> {
  const { args, io, json, provider, ref } = c;
  const r = await ref();
  const spec = parsePortSpec(args.positionals[1]);
  return await runPortForward(portForwardService(new Map([['kruntimes', provider]]), createLogger(io.stderr, 'warn')), r, spec, io, { json });
}

/** Every verb's runner. */
const VERB_RUNNERS: { [V in Verb]: (c: KruntimesVerbContext) => Promise<number> } = {
  contexts: contextsVerb,
  list: listVerb,
  create: createVerb,
  get: getVerb,
  exec: execVerb,
  close: closeVerb,
  delete: deleteVerb,
  artifacts: artifactsVerb,
  logs: logsVerb,
  'port-forward': portForwardVerb,
};
