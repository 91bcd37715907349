// `sandbox-sessions sandbox <verb>`: local sandboxes from a shell — create, list, get, exec,
// cancel, close (Drain, or --immediate), delete, artifacts, operations, logs (runtimed's log of
// the Run, like `kubectl logs`), port-forward (portForward.ts, like `kubectl port-forward`) — with `--json` for
// scripts. It finds the local gateway daemon through the state file and starts it when none runs (the
// sandboxes it kept come back with it). `cancel` never starts it: without a daemon it kills from the command's
// exec record.
import { randomBytes } from 'node:crypto';
import type { SessionOperation } from '../../protocol/kruntimes/gateway';
import { isTerminalPhase, parseGoDuration, type Run } from '../../protocol/kruntimes/run';
import type { LocalGatewayClient } from '../gateway/localClient';
import { defaultStateDir, StateLayout } from '../local/stateRoot';
import { CREDENTIAL_FLAG_HELP, CREDENTIAL_FLAG_SYNOPSIS, credentialValues, parseCredentialFlags } from './credentialFlag';
import { bool, type CommandHelp, flag, type ParsedArgs, parseVerb, positiveIntFlag, UsageError, verbHelp, verbUsage, writeLine } from './args';
import { COMMAND_NOT_FOUND_EXIT_CODE, commandExitCode, commandNotFound, INTERRUPTED_EXIT_CODE } from './commandExitCode';
import { logQuery, readLogUntilInterrupt, withKubectlFollow } from './logFlags';
import { parsePortSpec, PORT_FORWARD_SYNOPSIS, runPortForward } from './portForward';
import { type CommandIo as CliIo, readAll } from './io';

// What a verb needs beyond parsing its flags is loaded when it runs (`await import(…)`, evaluated on first use
// inside this bundle): the gateway client and undici for the verbs that reach the daemon, the OpenSandbox
// settings for create, the local provider and port substrate for port-forward, the exec records for cancel
// without a daemon, the error table on failure. Loading all of it cost every call ~0.2 s (bench/cliStart.ts).
let localClientModule: typeof import('../gateway/localClient.js') | undefined;
async function localClient(): Promise<typeof import('../gateway/localClient.js')> {
  localClientModule ??= await import('../gateway/localClient.js');
  return localClientModule;
}

/** No daemon: its process lives but its port refused the first request (or, for `cancel`, none answers /healthz). */
async function gatewayNotRunning(): Promise<Error> {
  return new (await localClient()).LocalApiError(503, 'the local gateway is not running; start it with `sandbox-sessions gateway --detach`');
}

/** The daemon's 404 for a Run (`runs.kruntimes.io "NAME" not found`), said in this CLI's words. */
const RUN_NOT_FOUND = /^runs\.kruntimes\.io "([^"]*)" not found$/;

/** Every verb of `sandbox`, with its synopsis (the help text); the dispatcher accepts only these. */
const VERBS = {
  create: `create [--name N] [--runtime process|bubblewrap|opensandbox] [--idle-timeout S] [--lease-timeout S] [--timeout DUR]
    [--queue-size N] [--operation-timeout DUR] [--env K=V]... [--no-wait]
    opensandbox: [--image IMAGE] [--cpu Q] [--memory Q] [--ttl-seconds S] [--allow-egress DOMAIN]...
    [${CREDENTIAL_FLAG_SYNOPSIS}]...
    (the daemon needs OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY, or the extension's settings)
    ${CREDENTIAL_FLAG_HELP.replace(/\n/g, '\n    ')}`,
  list: `list [--all-namespaces]
    tab-separated: NAMESPACE/NAME, runtime, phase, message, and the session revision
    the sandbox was opened from or saved as (demo@r3)`,
  get: 'get NAME',
  exec: 'exec NAME [--shell CMD | -- ARGV...] [--stdin] [--workdir DIR] [--timeout-ms N] [--isolate-network] [--operation-id ID]',
  cancel: 'cancel NAME OPERATION_ID',
  close: 'close NAME [--immediate] [--no-wait]',
  delete: 'delete NAME',
  artifacts: `artifacts NAME [--output DIR [--unpack]]
    without --output: where Drain exported them (a folder is kept as a .tar.gz), digests verified;
    --output: copies them there, verified (--unpack: a folder unpacked), as kruntimes artifacts does`,
  operations: 'operations NAME',
  logs: 'logs NAME [-f|--follow] [--tail N] [--since DUR | --since-time RFC3339] [--timestamps]',
  'port-forward': PORT_FORWARD_SYNOPSIS,
} as const;
type Verb = keyof typeof VERBS;

export const SANDBOX_HELP: CommandHelp = verbHelp('sandbox', VERBS, 'common: --namespace NS (default "default"), --state-dir DIR, --json');

const BOOLEANS = ['json', 'no-wait', 'all-namespaces', 'isolate-network', 'immediate', 'follow', 'timestamps', 'stdin', 'unpack'];
/** Raw stdin that still fits the gateway's 1 MiB request once base64-encoded (with the request around it). */
const STDIN_LIMIT_BYTES = 700 * 1024;
const VALUES = ['image', 'cpu', 'memory', 'ttl-seconds', 'allow-egress', 'credential', 'name', 'runtime', 'idle-timeout', 'lease-timeout', 'timeout', 'queue-size', 'operation-timeout', 'env', 'namespace', 'state-dir', 'shell', 'workdir', 'timeout-ms', 'operation-id', 'tail', 'since', 'since-time', 'output'];

export interface SandboxCommandOptions {
  /** How to start the daemon when none runs (default: this program with `gateway`). */
  gatewayCommand?: string[];
  /** Where `--credential` secrets' values are (SANDBOX_SESSIONS_CREDENTIAL_<NAME>; default process.env). */
  env?: NodeJS.ProcessEnv;
}

function runSummary(run: Run): Record<string, unknown> {
  return {
    namespace: run.metadata.namespace,
    name: run.metadata.name,
    uid: run.metadata.uid,
    runtime: run.spec.runtime,
    phase: run.status?.phase ?? 'Pending',
    message: run.status?.message,
    endpoint: run.status?.endpoint?.url,
    ...(run.status?.artifactRefs?.length ? { artifacts: run.status.artifactRefs } : {}),
  };
}

export async function runSandboxCommand(argv: string[], io: CliIo, opts: SandboxCommandOptions = {}): Promise<number> {
  const parsed = parseVerb(withKubectlFollow(argv), SANDBOX_HELP, { booleans: BOOLEANS, values: VALUES }, io.stderr);
  if ('exitCode' in parsed) return parsed.exitCode;
  const { args } = parsed;
  const verb = parsed.verb as Verb;
  const json = bool(args, 'json');
  const stateDir = flag(args, 'state-dir') ?? defaultStateDir();
  const ns = flag(args, 'namespace') ?? 'default';
  const out = (text: string, value: unknown): void => writeLine(io.stdout, json ? JSON.stringify(value) : text);
  const need = (i: number, what: string): string => {
    const v = args.positionals[i];
    if (v === undefined) throw new UsageError(`${verb} needs ${what}`);
    return v;
  };
  const connect = async (probeOnly = false): Promise<LocalGatewayClient> => {
    const [{ ensureGateway, findGateway, findLiveGatewayUnprobed }, { LocalGatewayClient }] = await Promise.all([import('../gateway/daemonClient.js'), localClient()]);
    // A live daemon is taken without a probe: the verb's first request is one (a refused connection is "not
    // running", below). None alive: it is started, with a probe, as `doctor` says ("starts on demand").
    const handle = probeOnly ? await findGateway(stateDir) : ((await findLiveGatewayUnprobed(stateDir)) ?? (await ensureGateway({ stateDir, command: opts.gatewayCommand })));
    if (!handle) throw await gatewayNotRunning();
    return new LocalGatewayClient(handle.url, handle.token, undefined, true); // a short-lived process: node:http
  };
  const c: SandboxVerbContext = { args, io, opts, json, stateDir, ns, out, need, connect };

  try {
    if (!Object.hasOwn(VERBS, verb)) throw new UsageError(`unknown sandbox command ${verb}`);
    return await VERB_RUNNERS[verb](c);
  } catch (caught) {
    const err = (await import('../gateway/daemonClient.js')).isConnectionRefused(caught) ? await gatewayNotRunning() : caught;
    const { exitCodeFor } = await import('../errorMapping.js');
    if (err instanceof UsageError) {
      writeLine(io.stderr, `error: ${err.message}\n${verbUsage(SANDBOX_HELP, verb)}`);
      return exitCodeFor(err);
    }
    const missing = verb === 'exec' ? commandNotFound(err) : undefined;
    if (missing !== undefined) {
      // As a shell says it, and with its exit code: the program is not in the sandbox.
      const text = `${missing}: command not found in sandbox ${ns}/${args.positionals[0] ?? ''}`;
      writeLine(io.stderr, json ? JSON.stringify({ error: text }) : `error: ${text}`);
      return COMMAND_NOT_FOUND_EXIT_CODE;
    }
    const message = await errorText(err, ns, verb === 'create' && flag(args, 'runtime') === 'opensandbox' ? (opts.env ?? process.env) : undefined);
    writeLine(io.stderr, json ? JSON.stringify({ error: message }) : `error: ${message}`);
    return exitCodeFor(err);
  }
}

/**
 * A failure in words a user can act on: the daemon's Kubernetes-style "not found" of a Run names the sandbox
 * and where to see them; an OpenSandbox refusal says when this shell's settings are not the daemon's.
 */
async function errorText(err: unknown, ns: string, openSandboxEnv: NodeJS.ProcessEnv | undefined): Promise<string> {
  const { LocalApiError } = await localClient();
  if (!(err instanceof LocalApiError)) return (err as Error).message;
  const missing = err.status === 404 ? RUN_NOT_FOUND.exec(err.message) : null;
  if (missing) return `no sandbox ${ns}/${missing[1]} here (\`sandbox-sessions sandbox list --all-namespaces\` lists them)`;
  const { NO_CONNECTION_MESSAGE } = await import('../sandboxes/opensandbox/connectionFile.js');
  if (openSandboxEnv?.OPEN_SANDBOX_DOMAIN?.trim() && err.message.includes(NO_CONNECTION_MESSAGE)) {
    return `${err.message} (HTTP ${err.status}). This shell sets OPEN_SANDBOX_DOMAIN, but the gateway daemon, started earlier, was not given it: stop it with \`sandbox-sessions gateway --stop\` and run this again, and it starts with this environment`;
  }
  return `${err.message} (HTTP ${err.status})`;
}

/** What every verb works with: the parsed flags, where to write, and how to reach the daemon. */
interface SandboxVerbContext {
  args: ParsedArgs;
  io: CliIo;
  opts: SandboxCommandOptions;
  json: boolean;
  stateDir: string;
  ns: string;
  /** Writes `text`, or `value` as JSON with --json. */
  out(text: string, value: unknown): void;
  /** The i-th positional argument, or a usage error naming `what`. */
  need(i: number, what: string): string;
  /**
   * The daemon's client. A live daemon process is taken without a probe — a refused first request then fails as
   * "not running" — and none alive is started. `probeOnly`: never start one; "not running" unless /healthz answers
   * (a verb with a way without the daemon).
   */
  connect(probeOnly?: boolean): Promise<LocalGatewayClient>;
}

async function createVerb(c: SandboxVerbContext): Promise<number> {
  const { args, ns, out, connect } = c;
  // Checked before the daemon is started or reached: a wrong flag changes nothing.
  const credentialBindings = parseCredentialFlags(args.flags.get('credential') ?? []);
  const session: Record<string, unknown> = {};
  const idle = positiveIntFlag(args, 'idle-timeout');
  if (idle !== undefined) session.idleTimeoutSeconds = idle;
  const lease = positiveIntFlag(args, 'lease-timeout');
  if (lease !== undefined) session.leaseTimeoutSeconds = lease;
  const queue = positiveIntFlag(args, 'queue-size', 'operations');
  if (queue !== undefined) session.queueSize = queue;
  const opTimeout = durationFlag(args, 'operation-timeout');
  if (opTimeout !== undefined) session.operationTimeout = opTimeout;
  const env = (args.flags.get('env') ?? []).map((kv) => {
    const i = kv.indexOf('=');
    if (i <= 0) throw new UsageError(`--env needs NAME=VALUE, got ${kv}`);
    return { name: kv.slice(0, i), value: kv.slice(i + 1) };
  });
  const name = flag(args, 'name');
  const timeout = durationFlag(args, 'timeout');
  const ttl = positiveIntFlag(args, 'ttl-seconds');
  const { openSandboxAnnotations } = await import('../sandboxes/opensandbox/runSettings.js');
  const annotations = openSandboxAnnotations({
    image: flag(args, 'image'),
    cpu: flag(args, 'cpu'),
    memory: flag(args, 'memory'),
    ...(ttl !== undefined ? { ttlSeconds: ttl } : {}),
    allowedEgressDomains: args.flags.get('allow-egress') ?? [],
    credentialBindings,
  });
  const runtime = flag(args, 'runtime') ?? 'process';
  if (Object.keys(annotations).length > 0 && runtime !== 'opensandbox') throw new UsageError('--image, --cpu, --memory, --ttl-seconds, --allow-egress and --credential are for --runtime opensandbox');
  const client = await connect();
  // The secrets' values go to the daemon's memory only (never into the Run's annotations, which hold their names).
  const values = credentialValues(credentialBindings, c.opts.env ?? process.env);
  if (Object.keys(values).length > 0) await client.putSecrets(values);
  let run = await client.createRun(ns, {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: { ...(name ? { name } : { generateName: 'sandbox-' }), ...(Object.keys(annotations).length > 0 ? { annotations } : {}) },
    spec: {
      runtime,
      mode: { session },
      ...(env.length > 0 ? { env } : {}),
      ...(timeout ? { timeout } : {}),
    },
  });
  if (!bool(args, 'no-wait')) run = await client.waitPhase(ns, run.metadata.name ?? '', ['Ready'], 120_000);
  out(`${run.metadata.name}\t${run.status?.phase}\t${run.status?.message ?? ''}`, runSummary(run));
  return run.status?.phase === 'Failed' ? 1 : 0;
}

async function listVerb(c: SandboxVerbContext): Promise<number> {
  const { args, io, json, ns, out, connect } = c;
  const client = await connect();
  const runs = await client.listRuns(bool(args, 'all-namespaces') ? undefined : ns);
  const { sessionRevisionOf } = await import('../../protocol/sandboxRevision.js');
  if (json) out('', runs.map((r) => ({ ...runSummary(r), sessionRevision: sessionRevisionOf(r.metadata) })));
  else {
    for (const r of runs) {
      // The last column: the session revision the sandbox was opened from or saved as (`demo@r3`), if any.
      const mark = sessionRevisionOf(r.metadata);
      const session = mark === undefined ? '' : `${mark.sessionId}@${mark.revision}`;
      writeLine(io.stdout, `${r.metadata.namespace}/${r.metadata.name}\t${r.spec.runtime}\t${r.status?.phase ?? 'Pending'}\t${r.status?.message ?? ''}\t${session}`);
    }
  }
  return 0;
}

async function getVerb(c: SandboxVerbContext): Promise<number> {
  const { ns, out, need, connect } = c;
  const run = await (await connect()).getRun(ns, need(0, 'a sandbox name'));
  out(JSON.stringify(run, null, 2), run);
  return 0;
}

async function execVerb(c: SandboxVerbContext): Promise<number> {
  const { args, io, json, ns, out, need, connect } = c;
  const name = need(0, 'a sandbox name');
  const shell = flag(args, 'shell');
  if ((shell === undefined) === (args.rest.length === 0)) throw new UsageError('exec needs either --shell CMD or -- ARGV...');
  const timeoutMs = positiveIntFlag(args, 'timeout-ms', 'milliseconds');
  const workdir = flag(args, 'workdir');
  if (workdir !== undefined && (workdir.startsWith('/') || workdir.split('/').includes('..'))) {
    throw new UsageError(`--workdir is a folder of the sandbox's workspace, relative to its root (e.g. src/app), got ${workdir}`);
  }
  // --stdin: this process's stdin becomes the command's (it travels base64 in the one request).
  const stdin = bool(args, 'stdin') ? await readAll(io.stdin ?? process.stdin, STDIN_LIMIT_BYTES) : undefined;
  const op = {
    command: {
      ...(shell !== undefined ? { shell } : { argv: args.rest }),
      ...(stdin !== undefined ? { stdin: stdin.toString('base64') } : {}),
      ...(workdir ? { workingDirectory: workdir } : {}),
      ...(timeoutMs !== undefined ? { timeoutMillis: timeoutMs } : {}),
      ...(bool(args, 'isolate-network') ? { isolateNetwork: true } : {}),
    },
  };
  // The flags are checked above, before the daemon is reached: a wrong one runs nothing.
  const client = await connect();
  const run = await client.getRun(ns, name);
  const { endpointPathOf } = await localClient();
  if (!json) return await execLive(client, endpointPathOf(run), op, flag(args, 'operation-id'), io);
  const result = await client.execute(endpointPathOf(run), op, { operationId: flag(args, 'operation-id') });
  const cmd = result.command ?? { exitCode: 0 };
  out('', {
    exitCode: cmd.exitCode,
    stdout: Buffer.from(cmd.stdout ?? '', 'base64').toString('utf8'),
    stderr: Buffer.from(cmd.stderr ?? '', 'base64').toString('utf8'),
    timedOut: cmd.timedOut ?? false,
    cancelled: cmd.cancelled === true,
  });
  return commandExitCode(cmd);
}

async function cancelVerb(c: SandboxVerbContext): Promise<number> {
  const { stateDir, ns, out, need, connect } = c;
  const name = need(0, 'a sandbox name');
  const operationId = need(1, 'an operation id');
  const client = await connect(true).catch(() => undefined);
  const result = client
    ? await client.cancel((await localClient()).endpointPathOf(await client.getRun(ns, name)), operationId)
    : await (await import('./sandboxCancel.js')).cancelFromRecord(stateDir, ns, name, operationId);
  if (result === 'unknown') {
    // Nothing was cancelled: a mistyped id must not look like success.
    if (c.json) out('', { result });
    else writeLine(c.io.stderr, `error: sandbox ${ns}/${name} has no operation ${operationId} (\`sandbox-sessions sandbox operations ${name}\` lists them)`);
    return 1;
  }
  out(result, { result });
  return 0;
}

async function closeVerb(c: SandboxVerbContext): Promise<number> {
  const { args, ns, out, need, connect } = c;
  const name = need(0, 'a sandbox name');
  const client = await connect();
  let run = await client.terminate(ns, name, bool(args, 'immediate') ? 'Immediate' : 'Drain');
  if (!bool(args, 'no-wait')) run = await client.waitPhase(ns, name, [], 10 * 60_000);
  const refs = run.status?.artifactRefs ?? [];
  const exported = refs.length ? `\t${refs.length} artifact(s): ${refs.map((r) => r.name).join(', ')} (\`sandbox-sessions sandbox artifacts ${name}\` verifies them and gives their paths)` : '';
  out(`${name}\t${run.status?.phase}\t${run.status?.message ?? ''}${exported}`, runSummary(run));
  return !isTerminalPhase(run.status?.phase) || run.status?.phase === 'Succeeded' || run.status?.phase === 'Cancelled' ? 0 : 1;
}

async function deleteVerb(c: SandboxVerbContext): Promise<number> {
  const { ns, out, need, connect } = c;
  const name = need(0, 'a sandbox name');
  await (await connect()).deleteRun(ns, name);
  out(`deleted ${ns}/${name}`, { deleted: true, namespace: ns, name });
  return 0;
}

async function artifactsVerb(c: SandboxVerbContext): Promise<number> {
  const { args, io, json, stateDir, ns, out, need, connect } = c;
  const name = need(0, 'a sandbox name');
  const output = flag(args, 'output');
  if (output === undefined && bool(args, 'unpack')) throw new UsageError('--unpack goes with --output DIR (where to unpack)');
  if (output !== undefined) return downloadArtifacts(c, name, output);
  const run = await (await connect()).getRun(ns, name);
  const store = (run.status?.artifactStore as { filesystem?: { path?: string } } | undefined)?.filesystem?.path ?? new StateLayout(stateDir).artifactStoreRoot;
  const { verifyArtifact } = await import('../local/artifactStore.js');
  const list = [];
  for (const ref of run.status?.artifactRefs ?? []) {
    const v = await verifyArtifact(store, ref);
    list.push({ name: ref.name, type: ref.type, sizeBytes: ref.sizeBytes, digest: ref.digest, contentType: ref.contentType, path: v.file, verified: v.ok });
  }
  if (json) out('', list);
  else if (list.length === 0) writeLine(io.stdout, `no artifacts (phase ${run.status?.phase ?? 'Pending'})`);
  else for (const a of list) writeLine(io.stdout, `${a.name}\t${a.type}\t${a.sizeBytes}\t${a.digest}\t${a.verified ? 'ok' : 'DIGEST MISMATCH'}\t${a.path}`);
  return list.every((a) => a.verified) ? 0 : 1;
}

/** `artifacts --output DIR`: each artifact copied there and verified against its digest (a folder unpacked with --unpack). */
async function downloadArtifacts(c: SandboxVerbContext, name: string, output: string): Promise<number> {
  const { args, io, opts, json, stateDir, ns, out, connect } = c;
  await connect(); // the sandbox's Run is the daemon's: started when none runs
  const [{ createLogger }, { LocalSandboxProvider }, { LOCAL_CONTEXT }, path] = await Promise.all([
    import('../log.js'),
    import('../sandboxes/localProvider.js'),
    import('../../protocol/sandboxes.js'),
    import('node:path'),
  ]);
  const provider = new LocalSandboxProvider({ stateDir, log: createLogger(io.stderr, 'warn'), ...(opts.gatewayCommand ? { gatewayCommand: opts.gatewayCommand } : {}) });
  try {
    const ref = { provider: 'local' as const, context: LOCAL_CONTEXT, namespace: ns, name };
    const progress = json ? undefined : (_phase: string, message?: string) => message && writeLine(io.stderr, message);
    const list = await provider.downloadArtifacts(ref, path.resolve(output), { unpack: bool(args, 'unpack'), ...(progress ? { progress } : {}) });
    if (json) out('', list);
    else if (list.length === 0) writeLine(io.stderr, `sandbox ${ns}/${name} exported no artifacts`);
    else for (const a of list) writeLine(io.stdout, `${a.name}\t${a.type}\t${a.sizeBytes}\t${a.digest}\t${a.unpackedTo ?? a.path}`);
    return 0;
  } finally {
    await provider.dispose();
  }
}

async function operationsVerb(c: SandboxVerbContext): Promise<number> {
  const { io, json, ns, out, need, connect } = c;
  const records = await (await connect()).operations(ns, need(0, 'a sandbox name'));
  if (json) out('', records);
  else for (const r of records) writeLine(io.stdout, `${r.operationId}\t${r.state}\t${r.outcome ?? ''}\t${r.exitCode ?? ''}\t${r.summary}${r.message ? `\t${r.message}` : ''}`);
  return 0;
}

async function logsVerb(c: SandboxVerbContext): Promise<number> {
  const { args, io, ns, need, connect } = c;
  const name = need(0, 'a sandbox name');
  const query = logQuery(args);
  return readLogUntilInterrupt(query.follow === true, async (signal) => (await connect()).logs(ns, name, query, (line) => writeLine(io.stdout, line), signal));
}

async function portForwardVerb(c: SandboxVerbContext): Promise<number> {
  const { args, io, opts, json, stateDir, ns, need, connect } = c;
  const name = need(0, 'a sandbox name');
  const spec = parsePortSpec(args.positionals[1]);
  await connect(); // the daemon serves the sandbox's ports: started when none runs
  const [{ createLogger }, { LocalSandboxProvider }, { LocalPortSubstrate }, { PortForwardService }, { LOCAL_CONTEXT }] = await Promise.all([
    import('../log.js'),
    import('../sandboxes/localProvider.js'),
    import('../ports/localPorts.js'),
    import('../ports/portForwardService.js'),
    import('../../protocol/sandboxes.js'),
  ]);
  const log = createLogger(io.stderr, 'warn');
  const provider = new LocalSandboxProvider({ stateDir, log, ...(opts.gatewayCommand ? { gatewayCommand: opts.gatewayCommand } : {}) });
  try {
    const ref = { provider: 'local' as const, context: LOCAL_CONTEXT, namespace: ns, name };
    return await runPortForward(new PortForwardService(new Map([['local', provider]]), log, new Map([['local', new LocalPortSubstrate(provider, log)]])), ref, spec, io, { json });
  } finally {
    await provider.dispose();
  }
}

/** `--name DUR`, a Go duration (`90s`, `2m`, `1h30m`), checked before anything is created; undefined when absent. */
function durationFlag(args: ParsedArgs, name: string): string | undefined {
  const v = flag(args, name);
  if (v !== undefined && !(Number(parseGoDuration(v)) > 0)) throw new UsageError(`--${name} needs a duration such as 90s, 30m or 1h30m, got ${v}`);
  return v;
}

/** Every verb's runner. */
const VERB_RUNNERS: { [V in Verb]: (c: SandboxVerbContext) => Promise<number> } = {
  create: createVerb,
  list: listVerb,
  get: getVerb,
  exec: execVerb,
  cancel: cancelVerb,
  close: closeVerb,
  delete: deleteVerb,
  artifacts: artifactsVerb,
  operations: operationsVerb,
  logs: logsVerb,
  'port-forward': portForwardVerb,
};

/** `exec` for people: output as it happens (operations:stream); Ctrl+C cancels the command. */
async function execLive(client: LocalGatewayClient, endpointPath: string, op: SessionOperation, operationId: string | undefined, io: CliIo): Promise<number> {
  const id = operationId ?? randomBytes(16).toString('hex');
  let interrupted = false;
  const onSigint = (): void => {
    interrupted = true;
    void client.cancel(endpointPath, id).catch(() => undefined);
  };
  process.once('SIGINT', onSigint);
  try {
    const terminal = await client.stream(
      endpointPath,
      op,
      (event) => {
        if (event.type === 'output' && event.output.data) {
          (event.output.stream === 'stdout' ? io.stdout : io.stderr).write(Buffer.from(event.output.data, 'base64'));
        }
      },
      { operationId: id },
    );
    if (terminal.type === 'failed') {
      const [{ LocalApiError }, { statusForErrorFrame }] = await Promise.all([localClient(), import('../../protocol/kruntimes/sessionFrames.js')]);
      const message = terminal.failed.message ?? `operation failed (code ${terminal.failed.code})`;
      throw new LocalApiError(statusForErrorFrame(message), message);
    }
    const cmd = terminal.type === 'completed' ? terminal.completed.command : undefined;
    if (!cmd) return 0;
    return commandExitCode(cmd, interrupted);
  } catch (err) {
    // On era D a cancelled operation ends with an error frame (no `completed`): Ctrl+C is still 130.
    if (interrupted) return INTERRUPTED_EXIT_CODE;
    throw err;
  } finally {
    process.off('SIGINT', onSigint);
  }
}
