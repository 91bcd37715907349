// Materialize: copy an object's verified bytes to a new file. Temp file beside the destination,
// size and digest checked while streaming, fsync, then link into place (never replacing an existing
// file) and fsync the directory — a destination appears only when its bytes verified.
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { DigestMeter } from './digestMeter';
import { errnoCode, fsyncDir, removeIfPresent } from './durableFs';
import { SessionRepositoryError, toRepositoryError } from './errors';
import type { MaterializedObject, MaterializeObjectInput } from './objectStore';

/** Stream chunk size for object reads and writes. */
export const STREAM_CHUNK = 1024 * 1024;

/**
 * Copies a verified stream to a new file: temp file beside the destination, verify size and
 * digest, fsync, link into place (never replacing), fsync the directory. Shared by both stores.
 */
export async function materializeFromStream(
  input: MaterializeObjectInput,
  open: () => Promise<NodeJS.ReadableStream>,
): Promise<MaterializedObject> {
  const { ref, destination } = input;
  const dir = path.dirname(path.resolve(destination));
  const tmp = path.join(dir, `.${path.basename(destination)}.${randomUUID()}.tmp`);
  try {
    if (await exists(destination)) throw destinationExists(destination);
    const source = await open();
    const meter = new DigestMeter(ref.bytes, `object ${ref.objectRef}`);
    await pipeline(source, meter, createWriteStream(tmp, { flags: 'wx', mode: 0o600, highWaterMark: STREAM_CHUNK }));
    meter.verify(ref.digest);
    const handle = await fs.open(tmp, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await fs.link(tmp, destination);
    } catch (err) {
      if (errnoCode(err) === 'EEXIST') throw destinationExists(destination);
      throw err;
    }
    await removeIfPresent(tmp);
    await fsyncDir(dir);
    return { path: destination, bytes: ref.bytes, digest: ref.digest };
  } catch (err) {
    await removeIfPresent(tmp).catch(() => undefined);
    throw toRepositoryError(err, `materializing object ${ref.objectRef} to ${destination}`);
  }
}

function destinationExists(destination: string): SessionRepositoryError {
  return new SessionRepositoryError('io_failure', `destination ${destination} already exists; choose a new file name (checkout never overwrites)`);
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.lstat(file);
    return true;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}
