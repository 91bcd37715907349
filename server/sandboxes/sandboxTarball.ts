// Moving a whole session into or out of a sandbox as ONE file, for sandboxes whose image has GNU or BusyBox tar (seed 000:
// "upload and unpack the bundle at fixed paths", "repack, download"): far fewer gateway calls than a file-by-file
// copy when the sandbox is remote (OpenSandbox, a cluster). In: the checked-out bundle, verified here first, is
// uploaded as `bundle.tar.zst` and unpacked with `tar --zstd -xf`. Out: the sandbox packs its session dir with
// `tar --zstd -c` (plain USTAR, links followed as the gateway would), the file is downloaded and read here by a
// strict, bounded reader (regular files and directories only, confined paths, quotas) into a private tree — which
// the caller then packs with our codec through the snapshot policy, so the bundle is byte-compatible with Maka
// whatever tar the image has. The sandbox's tar is never trusted to write a Session Bundle. An image with tar but
// no `zstd` program (Debian's slim images, Alpine's) gets the same as plain, uncompressed tar: more bytes, the same
// single call each way; the bundle is decompressed here for it. BusyBox's tar (Alpine and other small images) has no
// `--zstd`, exclude list or `--hard-dereference`: the `zstd` program runs beside it on a file of its own, its hard
// links are read as copies (tarballReader.ts), and a session it would have to leave something out of goes file by
// file instead (`planSessionOut`).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import posix from 'node:path/posix';
import { pipeline } from 'node:stream/promises';
import type { SessionBundleLimits, SessionBundleManifestV1, WorkspaceSnapshotReport } from '../../protocol/bundle';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { GatewayError } from '../../protocol/kruntimes/gatewayErrors';
import { inspectSessionBundle } from '../bundle';
import { classifyWorkspacePath, excludedSegmentNames } from '../bundle/snapshotPolicy';
import { createBundleZstdDecompressor } from '../bundle/zstdFrame';
import { readSessionTarball } from './tarballReader';
import { fileParts, TransferError, uploadFile } from './transfer';

export { readSessionTarball } from './tarballReader';

/** Where the one-file transfers sit inside the sandbox, beside (never inside) the session directory. */
export const TARBALL_DIR = 'activation';

/** How the one file is compressed: with zstd when the image has the program, else not at all. */
export type TarballCompression = 'zstd' | 'none';

/** Which tar the image has: GNU tar, or BusyBox's (with `--strip-components`). */
export type SandboxTar = 'gnu' | 'busybox';

export type TarballSupport = { ok: true; tar: SandboxTar; compression: TarballCompression } | { ok: false; reason: string };

/** What an image's tar needs to move a session as one file: which tar, and how the file is compressed. */
export type TarballTools = Pick<Extract<TarballSupport, { ok: true }>, 'tar' | 'compression'>;

/** The image's tar, in words for progress messages. */
export function tarName(tar: SandboxTar): string {
  return tar === 'busybox' ? "BusyBox's tar" : 'tar';
}

/** The name of the one file: `base` + its extension. */
function tarballName(base: string, compression: TarballCompression): string {
  return compression === 'zstd' ? `${base}.tar.zst` : `${base}.tar`;
}

/** The GNU tar flag that reads or writes the one file (for plain tar one that changes nothing). */
function gnuFlag(compression: TarballCompression): string {
  return compression === 'zstd' ? '--zstd' : '--no-auto-compress';
}

/**
 * Shell that makes "$t" the plain tar of the one file "$1" for BusyBox's tar, which reads no zstd: the `zstd` program
 * writes it beside "$1" as "$1.tar" — a file, not a pipe, whose failure `sh` would not see.
 */
function busyboxPlain(compression: TarballCompression): string {
  return compression === 'zstd' ? 't=$1.tar; zstd -d -q -f -o "$t" -- "$1"; ' : 't=$1; ';
}

/** What a sandbox answered when asked whether it can unpack and pack one tarball (cached per client). */
const capability = new WeakMap<GatewayClient, Promise<TarballSupport>>();

/** What the probe prints when the image can move a session as one file: which tar, and whether it has `zstd`. */
const PROBE_ANSWER = /^(gnu|busybox) (zstd|none)\n?$/;

/**
 * Whether the sandbox's image has a POSIX shell and GNU tar or BusyBox's (one with `--strip-components`), and whether
 * it has the `zstd` program; else the reason, in words, for the log and the progress message (the caller falls back
 * to a file-by-file copy).
 */
export function tarballSupport(client: GatewayClient, options: { signal?: AbortSignal } = {}): Promise<TarballSupport> {
  let known = capability.get(client);
  if (known === undefined) {
    // BusyBox's tar has no --version; its --help (on stderr, exit status 1) starts with "BusyBox v…".
    const script =
      'command -v tar >/dev/null 2>&1 || { echo "the image has no tar"; exit 3; }; ' +
      'if tar --version 2>/dev/null | head -n 1 | grep -q "GNU tar"; then tar=gnu; ' +
      'elif tar --help 2>&1 | head -n 1 | grep -q "^BusyBox" && tar --help 2>&1 | grep -q -e "--strip-components"; then tar=busybox; ' +
      'else echo "the image\'s tar is neither GNU tar nor BusyBox\'s with --strip-components"; exit 3; fi; ' +
      'if command -v zstd >/dev/null 2>&1; then echo "$tar zstd"; else echo "$tar none"; fi';
    known = client.runCommand({ argv: ['sh', '-c', script] }, options).then(
      (out): TarballSupport => {
        const answer = PROBE_ANSWER.exec(out.stdout.toString('utf8'));
        if (out.exitCode === 0 && answer) return { ok: true, tar: answer[1] as SandboxTar, compression: answer[2] as TarballCompression };
        return { ok: false, reason: (out.exitCode !== 0 && out.stdout.toString('utf8').trim()) || `the probe exited ${out.exitCode}` };
      },
      (err: unknown): TarballSupport => {
        if (err instanceof GatewayError) return { ok: false, reason: `the probe failed: ${err.message}` };
        throw err;
      },
    );
    capability.set(client, known);
    // A cancelled probe is not an answer: ask again next time.
    known.catch(() => capability.delete(client));
  }
  return known;
}

async function runChecked(client: GatewayClient, script: string, args: string[], what: string, signal?: AbortSignal): Promise<void> {
  const out = await client.runCommand({ argv: ['sh', '-c', script, 'sh', ...args] }, { signal });
  if (out.exitCode !== 0) {
    throw new TransferError('transfer_failed', `${what} failed in the sandbox (exit ${out.exitCode}): ${out.stderr.toString('utf8').trim().slice(0, 500)}`);
  }
}

/**
 * Uploads a checked-out Session Bundle as one file and unpacks it at `dir` (relative to the sandbox root; must not
 * exist). The bundle is verified here first (every byte, against `expectedArchiveDigest`), so what tar unpacks is a
 * canonical archive: no links, no `..`, no absolute paths. Returns the state identity bytes, which are not part of
 * the layout the sandbox sees (they are read back and removed with the manifest).
 */
export async function unpackBundleIn(
  client: GatewayClient,
  bundle: { path: string; expectedArchiveDigest: string },
  input: BundleUpload & { dir: string },
): Promise<{ mediaType: string; bytes: Uint8Array }> {
  const signal = input.signal;
  const manifest = await verifiedManifest(bundle, input);
  await client.createDirectory(TARBALL_DIR, { signal });
  const name = tarballName(`${TARBALL_DIR}/bundle`, input.compression);
  await uploadAs(client, bundle.path, name, input);
  const script =
    input.tar === 'gnu'
      ? `set -e; mkdir -m 0755 -- "$2"; tar ${gnuFlag(input.compression)} -xf "$1" -C "$2" --no-same-owner; rm -f -- "$1" "$2/manifest.json"`
      : `set -e; trap 'rm -f -- "$1" "$1.tar"' EXIT; mkdir -m 0755 -- "$2"; ${busyboxPlain(input.compression)}tar -xf "$t" -C "$2" -o; rm -f -- "$2/manifest.json"`;
  await runChecked(client, script, [name, input.dir], 'unpacking the session bundle', signal);
  const identityPath = posix.join(input.dir, 'state-identity.json');
  const identity = await client.read(identityPath, { maxBytes: Math.min(input.limits.maxStateIdentityBytes + 1, 786_000) }, { signal });
  if (identity.truncated || identity.contents.length > input.limits.maxStateIdentityBytes) {
    throw new TransferError('transfer_failed', 'the state identity in the sandbox is larger than the bundle limits allow');
  }
  await client.deleteFile(identityPath, {}, { signal });
  return { mediaType: manifest.stateIdentity.mediaType, bytes: identity.contents };
}

/**
 * Open Revision in New Sandbox, where the sandbox is the workspace: uploads the checked-out bundle as one file into the
 * workspace itself (the file API writes nowhere else), under a dot-name nothing else uses, and unpacks only its
 * `workspace/` there (`--strip-components=1`; the state and the manifest stay out), with today's mtimes (`-m`), as
 * a file-by-file copy gives them. The bundle is verified here first, as for `unpackBundleIn`. The staged file is
 * removed whatever tar does.
 */
export async function unpackWorkspaceIn(client: GatewayClient, bundle: { path: string; expectedArchiveDigest: string }, input: BundleUpload): Promise<void> {
  const signal = input.signal;
  await verifiedManifest(bundle, input);
  const name = tarballName(`.sandbox-sessions-open-${randomBytes(6).toString('hex')}`, input.compression);
  const script =
    input.tar === 'gnu'
      ? `trap 'rm -f -- "$1"' EXIT; tar ${gnuFlag(input.compression)} -xf "$1" -m --no-same-owner --strip-components=1 workspace`
      : `set -e; trap 'rm -f -- "$1" "$1.tar"' EXIT; ${busyboxPlain(input.compression)}tar -xf "$t" -m -o --strip-components=1 workspace`;
  try {
    await uploadAs(client, bundle.path, name, input);
    await runChecked(client, script, [name], 'unpacking the workspace', signal);
  } catch (err) {
    await client.deleteFile(name).catch(() => undefined);
    throw err;
  }
}

/** What uploading a verified bundle as one file needs. */
export interface BundleUpload extends TarballTools {
  sessionId: string;
  limits: SessionBundleLimits;
  /** A private directory of this machine (0700) where an uncompressed copy is made for an image without zstd. */
  scratch: string;
  signal?: AbortSignal | undefined;
}

/** The manifest of the bundle, verified here (every byte, against its digest) and of the session expected. */
async function verifiedManifest(bundle: { path: string; expectedArchiveDigest: string }, input: BundleUpload): Promise<SessionBundleManifestV1> {
  const { manifest } = await inspectSessionBundle({ source: { path: bundle.path, expectedArchiveDigest: bundle.expectedArchiveDigest }, limits: input.limits });
  if (manifest.envelope.sessionId !== input.sessionId) {
    throw new TransferError('transfer_failed', `the checked-out bundle belongs to session ${manifest.envelope.sessionId}, not ${input.sessionId}`);
  }
  return manifest;
}

/** Uploads the bundle as `remote`: as it is, or decompressed here (the codec's decoder: its window cap) for plain tar. */
async function uploadAs(client: GatewayClient, bundlePath: string, remote: string, input: BundleUpload): Promise<void> {
  if (input.compression === 'zstd') {
    await uploadFile(client, bundlePath, remote, { signal: input.signal });
    return;
  }
  const plain = path.join(input.scratch, `plain-${randomBytes(6).toString('hex')}.tar`);
  try {
    await pipeline(fs.createReadStream(bundlePath, { highWaterMark: 1024 * 1024 }), createBundleZstdDecompressor(), fs.createWriteStream(plain, { flags: 'wx', mode: 0o600 }));
    await uploadFile(client, plain, remote, { signal: input.signal });
  } finally {
    await fsp.rm(plain, { force: true });
  }
}

/** What `packSessionOut` brought back: the two roots under `into`, and what the policy left in the sandbox. */
export interface UnpackedSession {
  stateRoot: string;
  workspaceRoot: string;
  skipped: WorkspaceSnapshotReport['excludedEntries'];
  /** Bytes of the compressed tarball that crossed the gateway. */
  transferredBytes: number;
}

/** The workspace entries the snapshot policy leaves out of a session in the sandbox, as `excludedInSandbox` found them. */
export interface ExcludedInSandbox {
  /** The tar member names to leave out. */
  names: string[];
  skipped: WorkspaceSnapshotReport['excludedEntries'];
}

/**
 * Whether the image's tar can pack the session at `dir` as one file: GNU tar always (it leaves out what the snapshot
 * policy excludes, found by `find` in the sandbox first); BusyBox's only when there is nothing to leave out, as it
 * takes no exclude list — else the reason, for the caller's file-by-file copy, which leaves such entries where they are.
 */
export async function planSessionOut(
  client: GatewayClient,
  input: { dir: string; tar: SandboxTar; signal?: AbortSignal | undefined },
): Promise<{ ok: true; excluded: ExcludedInSandbox } | { ok: false; reason: string }> {
  const excluded = await excludedInSandbox(client, input.dir, input.signal);
  if (input.tar === 'busybox' && excluded.names.length > 0) {
    const more = excluded.skipped.length > 1 ? ` and ${excluded.skipped.length - 1} more` : '';
    return { ok: false, reason: `the image's BusyBox tar cannot leave out what the snapshot policy excludes (${excluded.skipped[0]?.path}${more})` };
  }
  return { ok: true, excluded };
}

/**
 * Packs `dir/state` and `dir/workspace` inside the sandbox into one `tar.zst` (symbolic and hard links followed, as
 * a file-by-file copy through the gateway would), and reads it with `readSessionTarball` into `into` (which must not
 * exist) as it downloads. The workspace entries the snapshot policy leaves out are found in the sandbox first and
 * left out of the tarball (`planSessionOut`, unless the caller did that already: `excluded`); any other entry it
 * excludes is read past, not written. Both are reported as skipped.
 */
export async function packSessionOut(
  client: GatewayClient,
  input: TarballTools & { dir: string; into: string; limits: SessionBundleLimits; excluded?: ExcludedInSandbox | undefined; signal?: AbortSignal | undefined },
): Promise<UnpackedSession> {
  const signal = input.signal;
  let excluded = input.excluded;
  if (excluded === undefined) {
    const plan = await planSessionOut(client, input);
    if (!plan.ok) throw new TransferError('transfer_failed', plan.reason);
    excluded = plan.excluded;
  }
  const name = tarballName(`${TARBALL_DIR}/session-out`, input.compression);
  // A compressed tarball is bounded like a bundle; a plain one like the tar inside a bundle.
  const limit = input.compression === 'zstd' ? input.limits.maxCompressedBytes : input.limits.maxDecompressedTarBytes;
  await client.createDirectory(TARBALL_DIR, { signal });
  const excludeList = `${TARBALL_DIR}/session-out.exclude`;
  try {
    if (input.tar === 'gnu') {
      await client.writeFile(excludeList, Buffer.from(excluded.names.map((n) => `${n}\n`).join('')), { createParents: false }, { signal });
      const script =
        `set -e; rm -f -- "$1"; tar ${gnuFlag(input.compression)} -cf "$1" --format=ustar --numeric-owner --owner=0 --group=0 ` +
        '--dereference --hard-dereference --anchored --no-wildcards -X "$3" -C "$2" state workspace; rm -f -- "$3"';
      await runChecked(client, script, [name, input.dir, excludeList], 'packing the session', signal);
    } else {
      // BusyBox's tar: links followed (`-h`); hard links stay links, which the reader turns into copies.
      const script =
        input.compression === 'zstd'
          ? 'set -e; rm -f -- "$1" "$1.tar"; trap \'rm -f -- "$1.tar"\' EXIT; tar -c -h -f "$1.tar" -C "$2" state workspace; zstd -q -3 -f -o "$1" -- "$1.tar"'
          : 'set -e; rm -f -- "$1"; tar -c -h -f "$1" -C "$2" state workspace';
      await runChecked(client, script, [name, input.dir], 'packing the session', signal);
    }
    let size: number | undefined;
    for await (const e of client.list(TARBALL_DIR, { signal })) if (e.path === posix.basename(name)) size = e.sizeBytes ?? 0;
    if (size === undefined) throw new TransferError('transfer_failed', 'the packed session is missing in the sandbox');
    if (size > limit) throw new TransferError('transfer_failed', `the packed session is ${size} bytes, more than the bundle limit of ${limit}`);
    await fsp.mkdir(input.into, { mode: 0o700 });
    // Read as it arrives: the reader writes the session while the next parts are on their way, and no copy of the
    // tarball is kept here.
    const unpacked = await readSessionTarball(fileParts(client, name, size, { signal }), path.join(input.into, 'tree'), input.limits, input.compression);
    return { ...unpacked, skipped: [...excluded.skipped, ...unpacked.skipped], transferredBytes: size };
  } finally {
    await client.deleteFile(name, {}, { signal }).catch(() => undefined);
    if (input.tar === 'gnu') await client.deleteFile(excludeList, {}, { signal }).catch(() => undefined);
  }
}

/** Most bytes of one exclude list (it is written in one gateway call); past that, the reader skips the rest. */
const MAX_EXCLUDE_LIST_BYTES = 512 * 1024;

/**
 * The workspace entries of `dir` the snapshot policy leaves out, found by `find` in the sandbox as the policy walks
 * (top-down, not entering what it leaves out; names case-insensitive): the directories and files it leaves out by
 * name, and `*.log` files. Returns the tar member names to leave out of the tarball, and the report entries. Only
 * what the policy here confirms is an exclusion is left out — a `secret.log` is packed, for the snapshot to refuse;
 * so are a name with a newline (which an exclude list cannot hold) and whatever is past MAX_EXCLUDE_LIST_BYTES, and
 * the reader skips those.
 */
async function excludedInSandbox(client: GatewayClient, dir: string, signal: AbortSignal | undefined): Promise<ExcludedInSandbox> {
  const names = excludedSegmentNames().flatMap((n, i) => [...(i === 0 ? [] : ['-o']), '-iname', n]);
  const tests = ['(', ...names, ')', '-prune', '-o', '-type', 'f', '-iname', '*.log'];
  const script =
    'cd -- "$1" || exit 3; shift; find workspace -mindepth 1 \\( "$@" \\) -prune ' +
    '-exec sh -c \'for p; do if [ -d "$p" ]; then printf "d%s\\0" "$p"; else printf "f%s\\0" "$p"; fi; done\' sh {} +';
  const out = await client.runCommand({ argv: ['sh', '-c', script, 'sh', dir, ...tests] }, { signal });
  if (out.exitCode !== 0) return { names: [], skipped: [] };
  const members: string[] = [];
  const skipped: WorkspaceSnapshotReport['excludedEntries'] = [];
  let listBytes = 0;
  const records = out.stdout.toString('utf8').split('\0');
  // Every record ends with NUL: the last piece is empty, or a record cut short by an output limit.
  records.pop();
  for (const record of records) {
    const isDirectory = record.startsWith('d');
    const member = record.slice(1);
    const segments = member.split('/').slice(1);
    if (!member.startsWith('workspace/') || member.includes('\n') || segments.some((s) => s === '' || s === '.' || s === '..')) continue;
    const verdict = classifyWorkspacePath(segments, isDirectory);
    const bytes = Buffer.byteLength(member) + 1;
    if (verdict.verdict !== 'exclude' || listBytes + bytes > MAX_EXCLUDE_LIST_BYTES) continue;
    listBytes += bytes;
    members.push(member);
    skipped.push({ path: `${segments.join('/')}${isDirectory ? '/' : ''}`, category: verdict.category });
  }
  return { names: members, skipped };
}
