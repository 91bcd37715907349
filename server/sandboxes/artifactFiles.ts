// Putting downloaded artifacts on disk, for every provider: a verified writer (bytes land in a
// `*.partial` file beside the target and are published by one rename only when size and sha256
// match) and, re-exported from artifactUnpack.ts, a fail-closed unpacker for directory artifacts (tar.gz: only
// regular files and directories under relative, `..`-free paths; everything is built in a staging
// directory beside the destination and renamed into place, so a refused archive leaves nothing).
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { nextOrAbort, release, writeAll } from './abortableIo';
import { SandboxError } from './provider';

export { DEFAULT_UNPACK_LIMITS, unpackTarGz, type UnpackLimits } from './artifactUnpack';

export interface ExpectedContent {
  /** `sha256:<hex>` of the bytes. */
  digest: string;
  sizeBytes: number;
}

/**
 * Writes `source` to `target` through `<target>.<random>.partial` (created exclusively), hashing on
 * the way. Publishes with one rename only when the byte count and digest match `expected`; stops
 * before writing a chunk that would exceed `expected.sizeBytes`. The temp file is removed on every
 * failure (mismatch, source error, abort), so `target` is either the verified bytes or untouched.
 */
export async function writeVerified(source: AsyncIterable<Uint8Array>, target: string, expected: ExpectedContent, signal?: AbortSignal): Promise<void> {
  const name = path.basename(target);
  const tmp = `${target}.${randomBytes(6).toString('hex')}.partial`;
  const hash = createHash('sha256');
  let bytes = 0;
  let handle: fsp.FileHandle | undefined;
  const iterator = source[Symbol.asyncIterator]();
  try {
    handle = await fsp.open(tmp, 'wx', 0o644);
    for (;;) {
      const step = await nextOrAbort(iterator, signal);
      if (step.done) break;
      const chunk = step.value;
      if (bytes + chunk.length > expected.sizeBytes) {
        throw new SandboxError(
          'artifact_invalid',
          `artifact ${name} sent more than its announced ${expected.sizeBytes} bytes; the download was stopped and nothing was kept`,
        );
      }
      hash.update(chunk);
      bytes += chunk.length;
      await writeAll(handle, chunk);
    }
    signal?.throwIfAborted();
    const actual = `sha256:${hash.digest('hex')}`;
    if (bytes !== expected.sizeBytes || actual !== expected.digest) {
      throw new SandboxError(
        'artifact_invalid',
        `artifact ${name} does not match its digest (${actual}, ${bytes} bytes; expected ${expected.digest}, ${expected.sizeBytes} bytes); nothing was kept`,
      );
    }
    await handle.sync();
    await handle.close();
    handle = undefined;
    try {
      await fsp.rename(tmp, target);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EISDIR' || code === 'ENOTDIR' || code === 'ENOTEMPTY') {
        throw new SandboxError('invalid_destination', `cannot save artifact ${name}: ${target} exists and is a directory; move it away or choose another folder`);
      }
      throw err;
    }
  } finally {
    release(iterator);
    await handle?.close().catch(() => undefined);
    await fsp.rm(tmp, { force: true });
  }
}

/** {@link writeVerified} from a local file (the local artifact store). */
export async function copyVerified(source: string, target: string, expected: ExpectedContent, signal?: AbortSignal): Promise<void> {
  const stream = fs.createReadStream(source, signal ? { signal } : {});
  try {
    await writeVerified(stream, target, expected, signal);
  } finally {
    stream.destroy();
  }
}

// ---------------------------------------------------------------------------------------------
