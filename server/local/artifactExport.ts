// Drain's export step (kruntimes runtimed, spec §5): each top-level entry of
// $KRUNTIME_ARTIFACTS_DIR, sorted by name, goes to the artifact store — a regular file as
// it is, a directory as a deterministic tar.gz — with a sha256 digest of the stored bytes.
// A symlink or special file, a bad name, or a size over the limits makes the export invalid
// (the Run ends Failed/ArtifactInvalid).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ArtifactRef } from '../../protocol/kruntimes/run';
import { tarDirectory, TarError } from './deterministicTar';
import { SandboxSessionsError } from '../../protocol/errors';

export const ArtifactLimits = {
  maxEntries: 32,
  maxNameBytes: 255,
  maxArtifactBytes: 1024 ** 3,
  maxTotalBytes: 10 * 1024 ** 3,
} as const;

export class ArtifactInvalidError extends SandboxSessionsError<'artifact_invalid'> {
  override readonly name = 'ArtifactInvalidError';
  readonly service = 'artifact';
  constructor(message: string) {
    super('artifact_invalid', message);
  }
}

const CONTENT_TYPES: Record<string, string> = {
  '.txt': 'text/plain; charset=utf-8',
  '.log': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.json': 'application/json',
  '.html': 'text/html; charset=utf-8',
  '.csv': 'text/csv; charset=utf-8',
  '.xml': 'application/xml',
  '.gz': 'application/gzip',
  '.tgz': 'application/gzip',
  '.zip': 'application/zip',
  '.tar': 'application/x-tar',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.svg': 'image/svg+xml',
  '.pdf': 'application/pdf',
};

export function contentTypeFor(name: string): string {
  return CONTENT_TYPES[path.extname(name).toLowerCase()] ?? 'application/octet-stream';
}

/** `namespaces/<ns>/runs/<uid>/<name>`, relative to the store root (the kruntimes filesystem layout). */
export function artifactLocation(namespace: string, uid: string, name: string): string {
  return `namespaces/${namespace}/runs/${uid}/${name}`;
}

function checkName(name: string): void {
  const bytes = Buffer.from(name, 'utf8');
  if (bytes.length === 0 || bytes.length > ArtifactLimits.maxNameBytes) {
    throw new ArtifactInvalidError(`artifact name ${JSON.stringify(name)} must be 1-255 bytes`);
  }
  if (bytes.toString('utf8') !== name || name.includes('\uFFFD')) throw new ArtifactInvalidError(`artifact name ${JSON.stringify(name)} is not valid UTF-8`);
  if (name.includes('/') || name.includes('\\') || name === '.' || name === '..') {
    throw new ArtifactInvalidError(`artifact name ${JSON.stringify(name)} must not contain separators`);
  }
}

class Meter extends Transform {
  readonly hash = createHash('sha256');
  bytes = 0;
  constructor(private readonly limit: number, private readonly label: string) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null, data?: Buffer) => void): void {
    this.bytes += chunk.length;
    if (this.bytes > this.limit) return done(new ArtifactInvalidError(`artifact ${this.label} exceeds ${this.limit} bytes`));
    this.hash.update(chunk);
    done(null, chunk);
  }
}

/**
 * Exports every top-level entry of `artifactsDir` into `<storeRoot>/<location>`. Entries are
 * written to a temp name and renamed, so a reader never sees half an artifact.
 */
export async function exportArtifacts(opts: {
  artifactsDir: string;
  storeRoot: string;
  namespace: string;
  uid: string;
  now?: () => Date;
}): Promise<ArtifactRef[]> {
  let names: string[];
  try {
    names = await fsp.readdir(opts.artifactsDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  names.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  if (names.length > ArtifactLimits.maxEntries) {
    throw new ArtifactInvalidError(`artifacts directory has ${names.length} entries; at most ${ArtifactLimits.maxEntries} are exported`);
  }
  const kinds: Array<{ name: string; dir: boolean }> = [];
  for (const name of names) {
    checkName(name);
    const st = await fsp.lstat(path.join(opts.artifactsDir, name));
    if (st.isSymbolicLink()) throw new ArtifactInvalidError(`artifact ${name} is a symlink; only files and directories are exported`);
    if (!st.isFile() && !st.isDirectory()) throw new ArtifactInvalidError(`artifact ${name} is not a regular file or directory`);
    kinds.push({ name, dir: st.isDirectory() });
  }
  const refs: ArtifactRef[] = [];
  let total = 0;
  for (const { name, dir } of kinds) {
    const location = artifactLocation(opts.namespace, opts.uid, name);
    const dest = path.join(opts.storeRoot, location);
    await fsp.mkdir(path.dirname(dest), { recursive: true, mode: 0o700 });
    const tmp = `${dest}.partial`;
    const meter = new Meter(ArtifactLimits.maxArtifactBytes, name);
    const src = path.join(opts.artifactsDir, name);
    try {
      if (dir) {
        // zlib is loaded when a directory is first exported, not with the daemon (it idles ~1.5 MB smaller).
        const { createGzip } = await import('node:zlib');
        await pipeline(Readable.from(tarDirectory(src)), createGzip({ level: 9 }), meter, fs.createWriteStream(tmp, { mode: 0o600 }));
      } else {
        await pipeline(fs.createReadStream(src), meter, fs.createWriteStream(tmp, { mode: 0o600 }));
      }
    } catch (err) {
      await fsp.rm(tmp, { force: true });
      if (err instanceof TarError) throw new ArtifactInvalidError(`artifact ${name}: ${err.message}`);
      throw err;
    }
    total += meter.bytes;
    if (total > ArtifactLimits.maxTotalBytes) {
      await fsp.rm(tmp, { force: true });
      throw new ArtifactInvalidError(`artifacts exceed ${ArtifactLimits.maxTotalBytes} bytes in total`);
    }
    await fsp.rename(tmp, dest);
    refs.push({
      name,
      driver: 'filesystem',
      type: dir ? 'directory' : 'file',
      location: { filesystem: { path: location } },
      sizeBytes: meter.bytes,
      digest: `sha256:${meter.hash.digest('hex')}`,
      contentType: dir ? 'application/gzip' : contentTypeFor(name),
      createdAt: (opts.now?.() ?? new Date()).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    });
  }
  return refs;
}
