// `sandbox-sessions bundle …`: pack, inspect, hydrate and clean up Session Bundles from a terminal, with the
// people-default limits (DEFAULT_PEOPLE_LIMITS), a progress line on stderr for long work, and every failure
// shown as `error [code]: message`. Exit codes: 0 success, 1 failure, 2 usage.
import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { BundleProgress } from '../bundle';
import { SessionBundleError, SessionSnapshotError } from '../bundle/errors';
import { type CommandHelp, UsageError } from './args';

// Each subcommand loads the codec part it runs (`await import(…)`, evaluated on first use inside this
// bundle): the codec, the protocol's zod schemas and the error table cost a trivial command like
// `cleanup` ~0.2 s and ~30 MB before it did anything (bench/cliStart.ts, issue 25).
const codec = () => import('../bundle/index.js');
const protocolBundle = () => import('../../protocol/bundle.js');
const errorMapping = () => import('../errorMapping.js');

export interface CliIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/**
 * The default identity's media type, MAKA_STATE_IDENTITY_MEDIA_TYPE of server/bundle/packWorkspace.ts, written out
 * so that the help does not load the codec (test/unit/bundle/cli.test.ts checks the two are the same).
 */
export const STATE_IDENTITY_MEDIA_TYPE = 'application/vnd.maka.session-state-identity+json;version=1';

/** Every bundle subcommand's synopsis (the help text); COMMANDS below must implement exactly these. */
const SYNOPSES = {
  pack: `sandbox-sessions bundle pack <state-dir> <workspace-dir> -o <out.tar.zst> --session-id <id>
        [--identity-file <file> [--identity-media-type <type>]] [--last-activation-id <id>]`,
  inspect: 'sandbox-sessions bundle inspect <file.tar.zst> [--json] [--expected-digest sha256:<hex>]',
  hydrate: 'sandbox-sessions bundle hydrate <file.tar.zst> <destination> --session-id <id>',
  cleanup: 'sandbox-sessions bundle cleanup <destination>',
} as const;

const PACK_NOTE = `pack snapshots the workspace first: .git, node_modules, caches and logs are left out (and listed);
a known secret file (.env, keys, credentials…) refuses the pack. Without --identity-file the identity is
{"schemaVersion":1,"makaSessionId":<session-id>} (${STATE_IDENTITY_MEDIA_TYPE}).
`;

const BUNDLE_USAGE = `usage:\n${Object.values(SYNOPSES).map((s) => `  ${s}`).join('\n')}\n\n${PACK_NOTE}`;

export const BUNDLE_HELP: CommandHelp = {
  usage: BUNDLE_USAGE,
  subcommands: {
    pack: `usage: ${SYNOPSES.pack}\n\n${PACK_NOTE}`,
    inspect: `usage: ${SYNOPSES.inspect}\n`,
    hydrate: `usage: ${SYNOPSES.hydrate}\n`,
    cleanup: `usage: ${SYNOPSES.cleanup}\n`,
  } satisfies Record<keyof typeof SYNOPSES, string>,
};

function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

const PHASE_LABEL: Record<BundleProgress['phase'], string> = { hash: 'hashing', write: 'packing', verify: 'verifying', read: 'reading' };

/** One progress line on stderr, only once work has taken more than a second; rewritten in place on a TTY. */
function progressReporter(stderr: NodeJS.WritableStream): { update: (p: BundleProgress) => void; done: () => void } {
  const started = Date.now();
  const tty = (stderr as NodeJS.WritableStream & { isTTY?: boolean }).isTTY === true;
  let last = 0;
  let shown = false;
  return {
    update(p) {
      const now = Date.now();
      if (now - started < 1000 || now - last < (tty ? 200 : 2000)) return;
      last = now;
      shown = true;
      const total = p.totalBytes === undefined ? '' : ` of ${formatBytes(p.totalBytes)}`;
      const line = `${PHASE_LABEL[p.phase]}: ${formatBytes(p.bytes)}${total}`;
      stderr.write(tty ? `\r\x1b[K${line}` : `${line}\n`);
    },
    done() {
      if (shown && tty) stderr.write('\n');
    },
  };
}

function positionals(values: string[], count: number, command: string): string[] {
  if (values.length !== count) throw new UsageError(`bundle ${command} takes ${count} argument${count === 1 ? '' : 's'}, got ${values.length}`);
  return values;
}

function requireOption(value: string | undefined, name: string): string {
  if (value === undefined || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

// The codec's messages never hold a raw path (bundle/errors.ts); the person gave the paths, so this command names them:
// it checks the ones it was given before the codec runs, and puts the path a later failure is about before its message.

function errnoOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' ? err.code : undefined;
}

/** Why a path the person gave cannot be used, in words (and the errno). */
function unusable(err: unknown): string {
  const code = errnoOf(err);
  const words: Record<string, string> = {
    ENOENT: 'does not exist',
    ENOTDIR: 'does not exist (a part of its path is not a directory)',
    EACCES: 'cannot be read (permission denied)',
    EPERM: 'cannot be read (operation not permitted)',
    ELOOP: 'cannot be read (too many symbolic links)',
  };
  return `${(code !== undefined ? words[code] : undefined) ?? `cannot be read (${err instanceof Error ? err.message : String(err)})`}${code !== undefined ? ` (${code})` : ''}`;
}

/** The kind of thing at `path` (following symlinks), or a failure naming `path` made by `fail`. */
async function kindAt(path: string, fail: (why: string) => Error): Promise<'file' | 'directory' | 'other'> {
  const st = await stat(path).catch((err: unknown) => {
    throw fail(`${path} ${unusable(err)}`);
  });
  return st.isFile() ? 'file' : st.isDirectory() ? 'directory' : 'other';
}

/** A bundle file to read: it exists and is a regular file. */
async function requireBundleFile(file: string, operation: 'inspect' | 'hydrate'): Promise<void> {
  const fail = (why: string) => new SessionBundleError('io_failure', `cannot ${operation} the bundle: ${why}`, { operation });
  if ((await kindAt(file, fail)) !== 'file') throw fail(`${file} is not a regular file`);
}

/** A new file or directory's parent exists and is a directory (`what` is the path the person gave). */
async function requireParent(what: string, operation: 'pack' | 'hydrate' | 'cleanup'): Promise<void> {
  const parent = dirname(resolve(what));
  const fail = (why: string) => new SessionBundleError('io_failure', `cannot ${{ pack: 'write', hydrate: 'hydrate into', cleanup: 'clean up for' }[operation]} ${what}: the directory ${why}`, { operation });
  if ((await kindAt(parent, fail)) !== 'directory') throw fail(`${parent} is not a directory`);
}

/** The same codec failure with the path it is about in front of its message (a snapshot failure names its own path). */
function about(path: string, err: unknown): unknown {
  return err instanceof SessionBundleError ? new SessionBundleError(err.code, `${path}: ${err.message}`, err.details) : err;
}

/** Runs a codec call; a failure about the destination names `destination`, any other one `subject`. */
async function naming<T>(subject: string, destination: string | undefined, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const aboutDestination = err instanceof SessionBundleError && (err.code === 'destination_exists' || /\bdestination\b/.test(err.message));
    throw about(aboutDestination && destination !== undefined ? destination : subject, err);
  }
}

async function pack(args: string[], io: CliIo): Promise<void> {
  const { values, positionals: pos } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      output: { type: 'string', short: 'o' },
      'session-id': { type: 'string' },
      'identity-file': { type: 'string' },
      'identity-media-type': { type: 'string' },
      'last-activation-id': { type: 'string' },
    },
  });
  const [stateDir, workspaceDir] = positionals(pos, 2, 'pack') as [string, string];
  const [{ DEFAULT_PEOPLE_LIMITS }, { defaultStateIdentity, packWorkspace }] = await Promise.all([protocolBundle(), import('../bundle/packWorkspace.js')]);
  const output = resolve(requireOption(values.output, 'output (-o)'));
  const sessionId = requireOption(values['session-id'], 'session-id');
  if (values['identity-media-type'] !== undefined && values['identity-file'] === undefined) throw new UsageError('--identity-media-type needs --identity-file');
  let identity = defaultStateIdentity(sessionId);
  if (values['identity-file'] !== undefined) {
    const size = (await stat(values['identity-file'])).size;
    if (size > DEFAULT_PEOPLE_LIMITS.maxStateIdentityBytes) throw new UsageError(`--identity-file is larger than ${formatBytes(DEFAULT_PEOPLE_LIMITS.maxStateIdentityBytes)}`);
    identity = { mediaType: values['identity-media-type'] ?? STATE_IDENTITY_MEDIA_TYPE, bytes: await readFile(values['identity-file']) };
  }
  for (const [dir, label] of [[stateDir, 'state'], [workspaceDir, 'workspace']] as const) {
    const fail = (why: string) => new SessionSnapshotError('invalid_input', `the ${label} directory ${why}`);
    if ((await kindAt(dir, fail)) !== 'directory') throw fail(`${dir} is not a directory`);
  }
  await requireParent(values.output!, 'pack');
  const progress = progressReporter(io.stderr);
  try {
    const activation = values['last-activation-id'];
    // A snapshot failure names its workspace path (or, below, the root it is about); a codec failure is about the output.
    const { artifact, workspace } = await naming(values.output!, values.output, () => packWorkspace({
      stateRoot: stateDir,
      workspaceRoot: workspaceDir,
      destination: output,
      sessionId,
      lastCommittedActivationId: activation,
      stateIdentity: identity,
      limits: DEFAULT_PEOPLE_LIMITS,
      onProgress: progress.update,
    }).catch((err: unknown) => {
      throw err instanceof SessionSnapshotError ? namedRoots(err, stateDir, workspaceDir) : err;
    }));
    progress.done();
    for (const e of workspace.excludedEntries) io.stderr.write(`excluded: ${e.path} (${e.category})\n`);
    io.stdout.write(
      `packed ${artifact.path}\n  digest ${artifact.archiveDigest}\n  ${artifact.entryCount} entries, ${formatBytes(artifact.payloadBytes)} payload, ` +
        `${formatBytes(artifact.compressedBytes)} compressed\n`,
    );
  } finally {
    progress.done();
  }
}

/** A snapshot failure about a root ("the state root is unusable …") names the directory the person gave; others pass. */
function namedRoots(err: SessionSnapshotError, stateDir: string, workspaceDir: string): Error {
  const m = /^the (state|workspace) root /.exec(err.message);
  if (m === null) return err;
  return new SessionSnapshotError(err.code, `the ${m[1]} directory ${m[1] === 'state' ? stateDir : workspaceDir} ${err.message.slice(m[0].length)}`, err.path);
}

async function inspect(args: string[], io: CliIo): Promise<void> {
  const { values, positionals: pos } = parseArgs({
    args,
    allowPositionals: true,
    options: { json: { type: 'boolean' }, 'expected-digest': { type: 'string' } },
  });
  const [file] = positionals(pos, 1, 'inspect') as [string];
  const [{ DEFAULT_PEOPLE_LIMITS, SHA256_DIGEST_PATTERN }, { inspectSessionBundle }] = await Promise.all([protocolBundle(), codec()]);
  const expected = values['expected-digest'];
  if (expected !== undefined && !SHA256_DIGEST_PATTERN.test(expected)) throw new UsageError('--expected-digest must be sha256:<64 lowercase hex>');
  await requireBundleFile(file, 'inspect');
  const progress = progressReporter(io.stderr);
  const result = await naming(file, undefined, () =>
    inspectSessionBundle({
      source: expected === undefined ? { path: resolve(file) } : { path: resolve(file), expectedArchiveDigest: expected },
      limits: DEFAULT_PEOPLE_LIMITS,
      onProgress: progress.update,
    }),
  );
  progress.done();
  if (values.json === true) {
    io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return;
  }
  const m = result.manifest;
  io.stdout.write(
    `ok ${file}\n  digest ${result.archiveDigest}\n  session ${m.envelope.sessionId}` +
      (m.envelope.lastCommittedActivationId === undefined ? '' : ` (last activation ${m.envelope.lastCommittedActivationId})`) +
      `\n  identity ${m.stateIdentity.mediaType}\n  tree ${m.payload.treeDigest}\n  ${result.entryCount} entries, ${formatBytes(result.payloadBytes)} payload, ` +
      `${formatBytes(result.decompressedTarBytes)} tar, ${formatBytes(result.compressedBytes)} compressed\n`,
  );
}

async function hydrate(args: string[], io: CliIo): Promise<void> {
  const { values, positionals: pos } = parseArgs({ args, allowPositionals: true, options: { 'session-id': { type: 'string' } } });
  const [file, destination] = positionals(pos, 2, 'hydrate') as [string, string];
  const sessionId = requireOption(values['session-id'], 'session-id');
  const [{ DEFAULT_PEOPLE_LIMITS }, { hydrateSessionBundle }] = await Promise.all([protocolBundle(), codec()]);
  await requireBundleFile(file, 'hydrate');
  await requireParent(destination, 'hydrate');
  const progress = progressReporter(io.stderr);
  const result = await naming(file, destination, () =>
    hydrateSessionBundle({
      source: { path: resolve(file) },
      expectedSessionId: sessionId,
      destinationRoot: resolve(destination),
      limits: DEFAULT_PEOPLE_LIMITS,
      onProgress: progress.update,
    }),
  );
  progress.done();
  io.stdout.write(`hydrated ${result.destinationRoot}\n  state ${result.stateRoot}\n  workspace ${result.workspaceRoot}\n  digest ${result.archiveDigest}\n`);
}

async function cleanup(args: string[], io: CliIo): Promise<void> {
  const { positionals: pos } = parseArgs({ args, allowPositionals: true, options: {} });
  const [destination] = positionals(pos, 1, 'cleanup') as [string];
  await requireParent(destination, 'cleanup');
  // A hydrate that was interrupted leaves no destination, only staging beside it: a destination that does not exist
  // is cleaned up when such leftovers are there, and otherwise refused (a mistyped path), before anything is touched.
  const root = resolve(destination);
  const kind = await stat(root).then(
    (st) => (st.isDirectory() ? 'directory' : 'other'),
    (err: unknown) => {
      if (errnoOf(err) === 'ENOENT') return 'missing' as const;
      throw new SessionBundleError('io_failure', `cannot clean up for ${destination}: ${destination} ${unusable(err)}`, { operation: 'cleanup' });
    },
  );
  if (kind === 'other') throw new SessionBundleError('io_failure', `cannot clean up for ${destination}: it is not a directory (a bundle hydrates into a directory)`, { operation: 'cleanup' });
  if (kind === 'missing') {
    const prefix = `.${basename(root)}.maka-session-bundle-staging-`;
    const leftovers = (await readdir(dirname(root))).some((name) => name.startsWith(prefix));
    if (!leftovers) {
      throw new SessionBundleError(
        'io_failure',
        `nothing to clean up for ${destination}: it does not exist, and no interrupted hydrate left staging for it in ${dirname(root)}; check the path`,
        { operation: 'cleanup' },
      );
    }
  }
  const { cleanupHydrationStaging } = await import('../bundle/cleanup.js');
  const r = await naming(destination, destination, () => cleanupHydrationStaging({ destinationRoot: root }));
  io.stdout.write(`removed ${r.removedStagingDirectories} staging director${r.removedStagingDirectories === 1 ? 'y' : 'ies'} and ${r.removedOwnershipRecords} ownership record(s) for ${r.destinationRoot}\n`);
}

const COMMANDS: Record<keyof typeof SYNOPSES, (args: string[], io: CliIo) => Promise<void>> = { pack, inspect, hydrate, cleanup };

export async function runBundleCommand(argv: string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  const run = command !== undefined && Object.hasOwn(COMMANDS, command) ? COMMANDS[command as keyof typeof COMMANDS] : undefined;
  if (run === undefined) {
    io.stderr.write(`${command === undefined ? 'missing bundle command' : `unknown bundle command ${JSON.stringify(command)}`}\n${BUNDLE_USAGE}`);
    return 2;
  }
  try {
    await run(rest, io);
    return 0;
  } catch (err) {
    const { CliExit, exitCodeFor } = await errorMapping();
    if (err instanceof UsageError || (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS'))) {
      io.stderr.write(`usage error: ${err.message}\n${BUNDLE_USAGE}`);
      return CliExit.usage;
    }
    if (err instanceof SessionBundleError || err instanceof SessionSnapshotError) {
      io.stderr.write(`error [${err.code}]: ${err.message}\n`);
      return exitCodeFor(err);
    }
    if (err instanceof TypeError || err instanceof RangeError) {
      io.stderr.write(`usage error: ${err.message}\n`);
      return CliExit.usage;
    }
    const code = typeof err === 'object' && err !== null && 'code' in err ? ` [${String(err.code)}]` : '';
    io.stderr.write(`error${code}: ${err instanceof Error ? err.message : String(err)}\n`);
    return exitCodeFor(err);
  }
}
