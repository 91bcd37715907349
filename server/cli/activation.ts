// `sandbox-sessions session activate <id> --message "…"` (one agent turn in a fresh local or OpenSandbox sandbox:
// streams the agent's events as provisional, then prints the committed outcome) and
// `sandbox-sessions session fork <id>@<rev> [--to <newId>]`. Wired into `session` by the caller;
// both take the arguments after the subcommand name.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import type { ActivationEvent, ActivationResult } from '../../protocol/activation';
import { ActivationError } from '../activation/errors';
import type { ActivationCredentials } from '../activation/runner';
import { activationCommandFromEnv, DEFAULT_ACTIVATION_COMMAND } from '../activation/sandboxLayout';
import { ActivationService } from '../activation/service';
import { createLogger } from '../log';
import type { SessionRepository } from '../repository/contract';
import { SessionRepositoryError } from '../repository/errors';
import { openSessionRepository } from '../repository/open';
import type { SandboxProvider } from '../sandboxes/provider';
import { LocalSandboxProvider } from '../sandboxes/localProvider';
import { bool, flag, type ParsedArgs, parseArgs, UsageError } from './args';
import { parseCredentialFlags } from './credentialFlag';
import type { OpenSandboxCredentialBinding } from '../../protocol/opensandboxCredentials';
import type { CommandIo } from './io';
import { CliExit, exitCodeFor } from '../errorMapping';

export const ACTIVATE_USAGE = `Usage: sandbox-sessions session activate <session-id> --message "…" [options] [-- <activation command…>]

Runs one activation (one agent turn) of the session in a fresh local sandbox and commits it.
The agent's events are printed as they arrive and are provisional; only the final line says
what was committed. A session that does not exist yet starts from an empty bundle.

Options:
  --message <text>              the stimulus (type message, payload {text})
  --activation-id <id>          idempotency key (default: a new one); retrying a committed id prints its stored outcome
  --agent-id <id>               agent of a session created by this activation (default: default-agent)
  --runtime <backend>           local backend: process (default), bubblewrap or opensandbox
  --provider <local|opensandbox>  opensandbox: the fresh sandbox is an OpenSandbox sandbox (the local runtime's
                                opensandbox backend; OPEN_SANDBOX_DOMAIN/OPEN_SANDBOX_API_KEY, or the editor's
                                settings); the session goes in and out as one tar.zst when the image has tar and zstd
  --image <image>               opensandbox: the sandbox image (it must run the activation command)
  --ttl-seconds <s>             opensandbox: the sandbox's TTL, renewed while it runs (60..86400; the last resort
                                that deletes a sandbox a crash left behind)
  --allow-egress <domain>       opensandbox: a domain the agent may reach (egress is denied otherwise); repeatable
  --credential <SECRET>=<host>[,<host>…][:bearer|:basic|:apiKey=<header>]
                                opensandbox: the Credential Vault adds secret SECRET to the agent's requests to
                                these hosts (Authorization: Bearer by default), which join the allowed domains; its
                                value is SANDBOX_SESSIONS_CREDENTIAL_<SECRET> here (else the gateway daemon's) and
                                never enters the sandbox or the bundle; repeatable
  --namespace <ns>              default: default
  --env <NAME>                  pass this variable from your environment to the agent (a credential; never bundled); repeatable
  --config-file <name>=<path>   copy a local file into the agent's --config-root as <name> (never bundled); repeatable
  --timeout <seconds>           cancel the agent after this long (default and maximum 300)
  --repository <dir|postgres://…>
  --json                        JSON lines: {"provisional": event} …, then {"result": …}
  -- <argv…>                    the activation command (default: $SANDBOX_SESSIONS_ACTIVATION_COMMAND, a JSON array,
                                else maka activate); the roots and --input are appended

Exit codes: 0 committed, 1 not committed (the reason is printed), 2 usage error, 3 refused (session busy,
activation in progress, idempotency conflict).
`;

export const FORK_USAGE = `Usage: sandbox-sessions session fork <session-id>@<revision> [--to <new-session-id>] [--fork-id <id>] [--repository …] [--json]

Creates a new session from a retained revision: its own r1, the same agent, forkedFrom lineage, the
state identity re-keyed (Maka: a new makaSessionId). The same --fork-id always yields the same target.
`;


/** Test seams: a provider and the process environment (defaults: the local provider, process.env). */
export interface ActivationCliDeps {
  providers?: Partial<Record<'local' | 'kruntimes', SandboxProvider>>;
  env?: NodeJS.ProcessEnv;
}

function report(err: unknown, io: CommandIo, json: boolean, usage: string, prefix: string): number {
  if (err instanceof UsageError) {
    io.stderr.write(`${prefix}: ${err.message}\n\n${usage}`);
    return exitCodeFor(err);
  }
  if (err instanceof ActivationError || err instanceof SessionRepositoryError) {
    io.stderr.write(json ? JSON.stringify({ error: err.toPayload() }) + '\n' : `${prefix}: ${err.code}: ${err.message}\n`);
    return exitCodeFor(err);
  }
  const message = err instanceof Error ? err.message : String(err);
  io.stderr.write(json ? JSON.stringify({ error: { name: err instanceof Error ? err.name : 'Error', message } }) + '\n' : `${prefix}: ${message}\n`);
  return err instanceof TypeError || err instanceof RangeError ? CliExit.usage : exitCodeFor(err);
}

function eventText(e: ActivationEvent): string {
  if (e.type === 'start') return `[provisional] start ${e.activationId} in ${e.workspaceRoot}`;
  if (e.type === 'outcome') return `[provisional] outcome ${e.status}${e.reason ? ` (${e.reason})` : ''}`;
  const content = (e.event as { content?: { text?: unknown } }).content;
  return `[provisional] event ${typeof content?.text === 'string' ? content.text : JSON.stringify(e.event).slice(0, 120)}`;
}

function resultText(r: ActivationResult): string {
  if (r.commit === 'not_committed') return `not committed: ${r.error?.code}: ${r.error?.message}\n`;
  const o = r.outcome;
  const head = `committed ${r.sessionId}@${r.revision}: ${o?.status}${o?.reason ? ` (${o.reason})` : ''}${r.deduplicated ? ' — stored outcome of an earlier run; nothing was run' : ''}`;
  const response = o?.response === undefined ? '' : `\n${typeof o.response === 'string' ? o.response : JSON.stringify(o.response, null, 2)}`;
  return `${head}${response}\n`;
}

async function credentialsFrom(args: ParsedArgs, env: NodeJS.ProcessEnv): Promise<ActivationCredentials> {
  const out: Required<ActivationCredentials> = { env: {}, configFiles: {} };
  for (const name of args.flags.get('env') ?? []) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new UsageError(`--env takes a variable name, got ${JSON.stringify(name)}`);
    const value = env[name];
    if (value === undefined) throw new UsageError(`--env ${name}: the variable is not set in this environment`);
    out.env[name] = value;
  }
  for (const spec of args.flags.get('config-file') ?? []) {
    const eq = spec.indexOf('=');
    const name = eq > 0 ? spec.slice(0, eq) : '';
    if (!name || name.startsWith('/') || name.split('/').some((s) => s === '' || s === '.' || s === '..')) {
      throw new UsageError(`--config-file takes <name>=<path> with a relative name, got ${JSON.stringify(spec)}`);
    }
    out.configFiles[name] = await fs.readFile(spec.slice(eq + 1));
  }
  return out;
}

/** Where the fresh sandbox runs: a local backend, or OpenSandbox (the local runtime's `opensandbox` backend) with its settings. */
function substrate(args: ParsedArgs): {
  runtime: string;
  opensandbox?: { image?: string; ttlSeconds?: number; allowedEgressDomains?: string[]; credentialBindings?: OpenSandboxCredentialBinding[] };
} {
  const provider = flag(args, 'provider') ?? 'local';
  if (provider !== 'local' && provider !== 'opensandbox') throw new UsageError(`--provider takes local or opensandbox, got ${JSON.stringify(provider)}`);
  const runtime = flag(args, 'runtime') ?? (provider === 'opensandbox' ? 'opensandbox' : 'process');
  if (provider === 'opensandbox' && runtime !== 'opensandbox') throw new UsageError(`--provider opensandbox runs on the opensandbox backend, not --runtime ${runtime}`);
  const image = flag(args, 'image');
  const ttl = flag(args, 'ttl-seconds');
  const egress = args.flags.get('allow-egress') ?? [];
  const credentialBindings = parseCredentialFlags(args.flags.get('credential') ?? []);
  if (runtime !== 'opensandbox') {
    if (image !== undefined || ttl !== undefined || egress.length > 0 || credentialBindings.length > 0) {
      throw new UsageError('--image, --ttl-seconds, --allow-egress and --credential are for --provider opensandbox');
    }
    return { runtime };
  }
  let ttlSeconds: number | undefined;
  if (ttl !== undefined) {
    ttlSeconds = Number(ttl);
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < 60 || ttlSeconds > 86_400) throw new UsageError('--ttl-seconds takes whole seconds from 60 to 86400');
  }
  const opensandbox = {
    ...(image !== undefined ? { image } : {}),
    ...(ttlSeconds !== undefined ? { ttlSeconds } : {}),
    ...(egress.length > 0 ? { allowedEgressDomains: egress } : {}),
    ...(credentialBindings.length > 0 ? { credentialBindings } : {}),
  };
  return { runtime, ...(Object.keys(opensandbox).length > 0 ? { opensandbox } : {}) };
}

function localProviders(deps: ActivationCliDeps): Partial<Record<'local' | 'kruntimes', SandboxProvider>> {
  // --credential values: the provider hands SANDBOX_SESSIONS_CREDENTIAL_<NAME> of this environment to the daemon.
  return deps.providers ?? { local: new LocalSandboxProvider({ log: createLogger(process.stderr, 'warn'), credentialEnv: deps.env ?? process.env }) };
}

/** `session activate …` → exit code. */
export async function runActivateCommand(argv: string[], io: CommandIo, deps: ActivationCliDeps = {}): Promise<number> {
  let json = false;
  let repo: SessionRepository | undefined;
  try {
    const args = parseArgs(argv, {
      booleans: ['json'],
      values: ['message', 'activation-id', 'agent-id', 'runtime', 'provider', 'image', 'ttl-seconds', 'allow-egress', 'credential', 'namespace', 'env', 'config-file', 'timeout', 'repository'],
    });
    json = bool(args, 'json');
    if (args.positionals.length !== 1) throw new UsageError('expected exactly one <session-id>');
    const sessionId = args.positionals[0] as string;
    const text = flag(args, 'message');
    if (text === undefined || text.trim() === '') throw new UsageError('--message is required');
    let timeoutMs: number | undefined;
    const timeout = flag(args, 'timeout');
    if (timeout !== undefined) {
      const s = Number(timeout);
      if (!Number.isFinite(s) || s <= 0 || s > 300) throw new UsageError('--timeout takes seconds, 0 < s ≤ 300');
      timeoutMs = Math.ceil(s * 1000);
    }
    const credentials = await credentialsFrom(args, deps.env ?? process.env);
    const where = substrate(args); // flags checked before anything is opened
    const repository = flag(args, 'repository');
    repo = await openSessionRepository(repository !== undefined ? { location: repository } : {});
    const service = new ActivationService({
      repository: repo,
      providers: localProviders(deps),
      log: createLogger(io.stderr, 'warn'),
      command: { ...(args.rest.length > 0 ? { argv: args.rest } : (activationCommandFromEnv(deps.env ?? process.env) ?? DEFAULT_ACTIVATION_COMMAND)), ...(timeoutMs !== undefined ? { timeoutMs } : {}) },
      credentials: () => credentials,
    });
    const agentId = flag(args, 'agent-id');
    const result = await service.run(
      {
        sessionId,
        activationId: flag(args, 'activation-id') ?? randomUUID(),
        stimulus: { type: 'message', payload: { text } },
        ...(agentId !== undefined ? { agentId } : {}),
        sandbox: { provider: 'local', namespace: flag(args, 'namespace') ?? 'default', ...where },
      },
      { onEvent: (e) => io.stdout.write(json ? JSON.stringify({ provisional: e }) + '\n' : eventText(e) + '\n') },
    );
    io.stdout.write(json ? JSON.stringify({ result }) + '\n' : resultText(result));
    return result.commit === 'committed' ? 0 : 1;
  } catch (err) {
    return report(err, io, json, ACTIVATE_USAGE, 'sandbox-sessions session activate');
  } finally {
    await repo?.close().catch(() => undefined);
  }
}

/** `session fork <id>@<rev> [--to <newId>]` → exit code. */
export async function runForkCommand(argv: string[], io: CommandIo, deps: ActivationCliDeps = {}): Promise<number> {
  let json = false;
  let repo: SessionRepository | undefined;
  try {
    const args = parseArgs(argv, { booleans: ['json'], values: ['to', 'fork-id', 'repository'] });
    json = bool(args, 'json');
    if (args.positionals.length !== 1) throw new UsageError('expected exactly one <session-id>@<revision>');
    const ref = args.positionals[0] as string;
    const at = ref.lastIndexOf('@');
    if (at <= 0 || !/^r[1-9][0-9]*$/.test(ref.slice(at + 1))) throw new UsageError(`name the source revision explicitly, e.g. ${ref.split('@')[0] || 'my-session'}@r3 (a fork never takes "latest")`);
    const repository = flag(args, 'repository');
    // A fork reads its source from the repository: one given that does not exist is a mistyped path, not a new one.
    repo = await openSessionRepository({ ...(repository !== undefined ? { location: repository } : {}), createIfMissing: false });
    const service = new ActivationService({ repository: repo, providers: localProviders({ providers: deps.providers ?? {} }), log: createLogger(io.stderr, 'warn') });
    const to = flag(args, 'to');
    const result = await service.fork({
      forkId: flag(args, 'fork-id') ?? randomUUID(),
      source: { sessionId: ref.slice(0, at), revision: ref.slice(at + 1) },
      ...(to !== undefined ? { targetSessionId: to } : {}),
    });
    io.stdout.write(
      json
        ? JSON.stringify(result, null, 2) + '\n'
        : `forked ${result.forkedFrom.sessionId}@${result.forkedFrom.revision} → ${result.target.sessionId}@${result.target.revision}${result.deduplicated ? ' (already done by this fork id)' : ''}\n${result.rekey ? `state identity: ${result.rekey.note}\n` : ''}`,
    );
    return 0;
  } catch (err) {
    return report(err, io, json, FORK_USAGE, 'sandbox-sessions session fork');
  } finally {
    await repo?.close().catch(() => undefined);
  }
}
