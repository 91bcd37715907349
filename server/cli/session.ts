// `sandbox-sessions session …`: the session repository from a shell — list, show, revisions,
// checkout (materialize a revision's bundle to a file), commit (publish a bundle file and CAS it
// onto a session, or create one), delete, gc, and diff (what a local sandbox changed since a
// revision); `--json` for scripts, `--repository` to choose a directory or a postgres:// URL
// (default: SANDBOX_SESSIONS_REPOSITORY, else the embedded one).
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import { parseArgs } from 'node:util';
import type { CommittedSessionRevision, SessionRevisionRef } from '../../protocol/repository';
import { assertBundleIsForSession } from '../repository/bundleIdentity';
import { materializeSessionCheckpointV1, publishSessionCheckpointV1 } from '../repository/checkpoint';
import type { SessionRepository } from '../repository/contract';
import { SessionRepositoryError } from '../repository/errors';
import { openSessionRepository } from '../repository/open';
import { ACTIVATE_USAGE, FORK_USAGE, runActivateCommand, runForkCommand } from './activation';
import { type CommandHelp, UsageError } from './args';
import { CliExit, exitCodeFor } from '../errorMapping';

interface Io {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** Every subcommand of `session`: its forms (synopsis, what it does). HANDLERS, activate and fork implement exactly these. */
const SUBCOMMANDS = {
  list: [['list', 'sessions with their head and retained revisions']],
  show: [['show <id>', 'the head revision (objects re-verified)']],
  revisions: [['revisions <id>', 'retained revisions, newest first']],
  checkout: [['checkout <id>[@rN] <dest-file>', "write a revision's bundle to a new file (verified while copying)"]],
  commit: [
    ['commit <id> <bundle-file> --expected-revision rN [--commit-id X] [--activation-id X]', 'publish the bundle and commit it if the head is still rN'],
    ['commit <id> <bundle-file> --agent-id A [--activation-id X]', 'create a new session with the bundle as r1'],
  ],
  delete: [['delete <id>', 'delete a session and its revisions (its id is never reused)']],
  diff: [
    ['diff <id>[@rN] <sandbox> [--namespace NS] [--state-dir DIR]', "what a local sandbox's workspace changed since the revision (A/M/D and path)"],
    ['diff <sandbox>', '… since the revision the sandbox was opened from or last saved as, else since it was opened (its opening snapshot)'],
  ],
  activate: [['activate <id> --message "…"', 'run one activation (agent turn) in a fresh sandbox and commit it']],
  fork: [['fork <id>@<rN> [--to <new-id>]', 'fork a session at a retained revision']],
  gc: [['gc', 'delete objects no retained revision or fork references']],
} as const satisfies Record<string, readonly (readonly [string, string])[]>;
type Subcommand = Exclude<keyof typeof SUBCOMMANDS, 'activate' | 'fork'>;

const OPTIONS_AND_EXIT_CODES = `Options:
  --repository <dir|postgres://…>        default: $SANDBOX_SESSIONS_REPOSITORY, else $XDG_DATA_HOME/sandbox-sessions/repository
  --json                                 machine-readable output
  --max-bytes <n>                        checkout: refuse bundles larger than this
  --namespace <ns>, --state-dir <dir>    diff: where the local sandbox is (default "default"; the local runtime's state)

Exit codes: 0 ok, 1 failed, 2 usage error, 3 conflict (revision_conflict, session_already_exists, idempotency_conflict).
`;

const row = ([synopsis, summary]: readonly [string, string]): string =>
  synopsis.length < 38 ? `  ${synopsis.padEnd(38)} ${summary}` : `  ${synopsis}\n${' '.repeat(41)}${summary}`;

const USAGE = `Usage: sandbox-sessions session <command> [options]

Commands:
${Object.values(SUBCOMMANDS).flat().map(row).join('\n')}

${OPTIONS_AND_EXIT_CODES}`;

export const SESSION_HELP: CommandHelp = {
  usage: USAGE,
  subcommands: {
    ...Object.fromEntries(
      Object.entries(SUBCOMMANDS).map(([name, forms]) => [
        name,
        `${forms.map(([synopsis, summary]) => `Usage: sandbox-sessions session ${synopsis}\n  ${summary}`).join('\n')}\n\n${OPTIONS_AND_EXIT_CODES}`,
      ]),
    ),
    activate: ACTIVATE_USAGE,
    fork: FORK_USAGE,
  },
};


export async function runSessionCommand(argv: string[], io: Io): Promise<number> {
  // One agent turn in a fresh sandbox, and forks: their own option sets (server/cli/activation.ts).
  if (argv[0] === 'activate') return runActivateCommand(argv.slice(1), io);
  if (argv[0] === 'fork') return runForkCommand(argv.slice(1), io);
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    io.stderr.write(`sandbox-sessions session: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...args] = positionals;
  if (command === undefined) {
    io.stderr.write(USAGE);
    return 2;
  }
  const json = values.json === true;
  let repo: SessionRepository | undefined;
  try {
    if (!Object.hasOwn(HANDLERS, command)) throw new UsageError(`unknown command "${command}"`);
    const handler = HANDLERS[command as Subcommand];
    if (command === 'commit') await checkCommit(args, values);
    // Only commit creates a repository; the others refuse a directory given with --repository that does not exist.
    repo = await openSessionRepository({ ...(values.repository !== undefined ? { location: values.repository } : {}), createIfMissing: command === 'commit' });
    const result = await handler(repo, args, values);
    io.stdout.write(json ? JSON.stringify(result.json, null, 2) + '\n' : result.text);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`sandbox-sessions session: ${err.message}\n\n${USAGE}`);
      return exitCodeFor(err);
    }
    if (err instanceof SessionRepositoryError) {
      io.stderr.write(json ? JSON.stringify({ error: err.toPayload() }) + '\n' : `sandbox-sessions session: ${err.code}: ${err.message}\n`);
      return exitCodeFor(err);
    }
    const message = err instanceof Error ? err.message : String(err);
    io.stderr.write(json ? JSON.stringify({ error: { name: err instanceof Error ? err.name : 'Error', message } }) + '\n' : `sandbox-sessions session: ${message}\n`);
    return err instanceof TypeError || err instanceof RangeError ? CliExit.usage : exitCodeFor(err);
  } finally {
    await repo?.close().catch(() => undefined);
  }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      repository: { type: 'string' },
      json: { type: 'boolean' },
      'expected-revision': { type: 'string' },
      'commit-id': { type: 'string' },
      'agent-id': { type: 'string' },
      'activation-id': { type: 'string' },
      'max-bytes': { type: 'string' },
      namespace: { type: 'string' },
      'state-dir': { type: 'string' },
    },
  });
}

type Values = ReturnType<typeof parse>['values'];
interface Output {
  json: unknown;
  text: string;
}
type Handler = (repo: SessionRepository, args: string[], values: Values) => Promise<Output>;

function exactly(args: string[], names: string[]): string[] {
  if (args.length !== names.length) throw new UsageError(`expected ${names.map((n) => `<${n}>`).join(' ') || 'no arguments'}, got ${args.length} argument(s)`);
  return args;
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ')).join('\n') + '\n';
}

function describeRevision(rev: CommittedSessionRevision): string {
  const bundle = rev.checkpoint.value.compatibilityBundle;
  return [
    `session:      ${rev.ref.sessionId}`,
    `revision:     ${rev.ref.revision}`,
    `agent:        ${rev.agentId}`,
    ...(rev.lastCommittedActivationId !== undefined ? [`activation:   ${rev.lastCommittedActivationId}`] : []),
    ...(rev.forkedFrom !== undefined ? [`forked from:  ${rev.forkedFrom.sessionId}@${rev.forkedFrom.revision}`] : []),
    `bundle:       ${bundle.bytes} bytes, ${bundle.digest}`,
    `manifest:     ${rev.checkpoint.manifest.digest}`,
  ].join('\n') + '\n';
}

/** `<id>` or `<id>@rN`; the last `@` separates, so ids may contain `@`. */
function parseTarget(target: string): { sessionId: string; revision?: string } {
  const at = target.lastIndexOf('@');
  if (at > 0 && /^r[1-9][0-9]*$/.test(target.slice(at + 1))) return { sessionId: target.slice(0, at), revision: target.slice(at + 1) };
  return { sessionId: target };
}

/** sha256 and size of a file, streamed (bundles can be large). */
async function digestFile(file: string): Promise<{ digest: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 1024 * 1024 })) {
    const buffer = chunk as Buffer;
    hash.update(buffer);
    bytes += buffer.length;
  }
  return { digest: `sha256:${hash.digest('hex')}`, bytes };
}

/**
 * A commit's arguments and its bundle file, checked before the repository is opened (which may create it): a bundle
 * packed for another session is refused before anything is written.
 */
async function checkCommit(args: string[], values: Values): Promise<{ sessionId: string; bundleFile: string; expectedRevision?: string; agentId?: string }> {
  const [sessionId, bundleFile] = exactly(args, ['id', 'bundle-file']) as [string, string];
  const expectedRevision = values['expected-revision'];
  const agentId = values['agent-id'];
  if ((expectedRevision === undefined) === (agentId === undefined)) {
    throw new UsageError('give --expected-revision rN (the revision you started from) to commit, or --agent-id A to create a new session');
  }
  if (agentId !== undefined && values['commit-id'] !== undefined) throw new UsageError('--commit-id applies to commits, not to creating a session');
  let stat;
  try {
    stat = await fs.stat(bundleFile);
  } catch (err) {
    throw new UsageError(`cannot read the bundle file ${bundleFile}: ${(err as Error).message}`);
  }
  if (!stat.isFile()) throw new UsageError(`${bundleFile} is not a regular file`);
  await assertBundleIsForSession(bundleFile, sessionId);
  return { sessionId, bundleFile, ...(expectedRevision !== undefined ? { expectedRevision } : {}), ...(agentId !== undefined ? { agentId } : {}) };
}

const HANDLERS: Record<Subcommand, Handler> = {
  async diff(repo, args, values) {
    // One argument: the sandbox, compared with the revision it was opened from or last saved as, else since opened.
    const [target, name] = (args.length === 1 ? [undefined, args[0]] : exactly(args, ['id[@rN]', 'sandbox'])) as [string | undefined, string];
    const { diffSandbox, diffText } = await import('./sessionDiff.js');
    const since = target === undefined ? {} : parseTarget(target);
    const changes = await diffSandbox(repo, { ...since, sandbox: { name, namespace: values.namespace ?? 'default', stateDir: values['state-dir'] } });
    return { json: changes, text: diffText(changes) };
  },

  async list(repo, args) {
    exactly(args, []);
    const sessions = await repo.listSessions();
    const rows = [['SESSION', 'HEAD', 'RETAINED', 'AGENT', 'FORKED FROM', 'UPDATED']];
    for (const s of sessions) {
      rows.push([
        s.sessionId,
        s.head.revision,
        `${s.oldestRetained}…${s.head.revision}`,
        s.agentId,
        s.forkedFrom ? `${s.forkedFrom.sessionId}@${s.forkedFrom.revision}` : '-',
        s.updatedAt,
      ]);
    }
    return { json: sessions, text: sessions.length === 0 ? 'no sessions yet (`sandbox-sessions session commit <id> <bundle-file> --agent-id A` creates one)\n' : table(rows) };
  },

  async show(repo, args) {
    const [sessionId] = exactly(args, ['id']);
    const head = await repo.checkoutCurrent(sessionId!);
    return { json: head, text: describeRevision(head) };
  },

  async revisions(repo, args) {
    const [sessionId] = exactly(args, ['id']);
    const revisions = await repo.listRevisions(sessionId!);
    const rows = [['REVISION', 'COMMITTED', 'BYTES', 'DIGEST', 'ACTIVATION']];
    for (const r of revisions) {
      const bundle = r.checkpoint.value.compatibilityBundle;
      rows.push([`${r.ref.revision}${r.isHead ? ' (head)' : ''}`, r.committedAt, String(bundle.bytes), bundle.digest, r.lastCommittedActivationId ?? '-']);
    }
    return { json: revisions, text: table(rows) };
  },

  async checkout(repo, args, values) {
    const [target, destination] = exactly(args, ['id[@rN]', 'dest-file']);
    const { sessionId, revision } = parseTarget(target!);
    const maxBytes = values['max-bytes'] === undefined ? Number.MAX_SAFE_INTEGER : Number(values['max-bytes']);
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new UsageError('--max-bytes must be a non-negative integer');
    const ref: SessionRevisionRef | undefined = revision !== undefined ? { sessionId, revision } : undefined;
    const rev = ref ? await repo.checkoutExact(ref) : await repo.checkoutCurrent(sessionId);
    const out = await materializeSessionCheckpointV1({ objectStore: repo.objects, checkpoint: rev.checkpoint, destination: destination!, maxBytes });
    return {
      json: { ref: rev.ref, path: out.path, bytes: out.bytes, expectedArchiveDigest: out.expectedArchiveDigest },
      text: `checked out ${rev.ref.sessionId}@${rev.ref.revision} to ${out.path} (${out.bytes} bytes, ${out.expectedArchiveDigest})\n`,
    };
  },

  async commit(repo, args, values) {
    const { sessionId, bundleFile, expectedRevision, agentId } = await checkCommit(args, values);
    const { digest, bytes } = await digestFile(bundleFile);
    const checkpoint = await publishSessionCheckpointV1({
      objectStore: repo.objects,
      compatibilityBundle: { path: bundleFile, archiveDigest: digest, compressedBytes: bytes },
      // The repository's own check of the bundle's session (bundleIdentity.ts), as for every committer.
      sessionId,
    });
    const activation = values['activation-id'] !== undefined ? { lastCommittedActivationId: values['activation-id'] } : {};
    const rev =
      agentId !== undefined
        ? await repo.createSession({ sessionId, agentId, checkpoint, ...activation })
        : await repo.commit({
            sessionId,
            expectedRevision: expectedRevision!,
            checkpoint,
            ...activation,
            ...(values['commit-id'] !== undefined ? { commitId: values['commit-id'] } : {}),
          });
    return { json: rev, text: `${agentId !== undefined ? 'created' : 'committed'} ${rev.ref.sessionId}@${rev.ref.revision} (${bytes} bytes, ${digest})\n` };
  },

  async delete(repo, args) {
    const [sessionId] = exactly(args, ['id']);
    const deleted = await repo.deleteSession(sessionId!);
    return { json: deleted, text: `deleted session ${deleted.sessionId} (${deleted.deletedRevisions} retained revision(s))\n` };
  },

  async gc(repo, args) {
    exactly(args, []);
    const result = await repo.collectGarbage();
    return { json: result, text: `deleted ${result.deletedObjects} unreferenced object(s)\n` };
  },
};
