// Crash-safe record files: write to a temp file in the same directory, fsync it, rename it
// over the target, fsync the directory. A reader sees the old or the new record, never half.
// Reads parse with a zod schema, so a damaged record is an error with its path, not a crash.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { z } from 'zod';
import { SandboxSessionsError } from '../../protocol/errors';

export class RecordError extends SandboxSessionsError<'record_invalid' | 'record_unreadable'> {
  override readonly name = 'RecordError';
  readonly service = 'local-store';
}

/**
 * `durable: false` skips the fsyncs: the rename is still atomic against a crashing process,
 * which is all records that describe live processes need (after a machine crash the boot id
 * differs and every such record is stale anyway).
 */
export async function writeFileAtomic(file: string, data: string | Uint8Array, mode = 0o600, durable = true): Promise<void> {
  const dir = path.dirname(file);
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const handle = await fs.open(tmp, 'wx', mode);
  try {
    await handle.writeFile(data);
    if (durable) await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  if (durable) await syncDir(dir);
}

async function syncDir(dir: string): Promise<void> {
  let handle: fs.FileHandle | undefined;
  try {
    handle = await fs.open(dir, 'r');
    await handle.sync();
  } catch {
    // Some file systems refuse fsync on directories; the rename is still atomic.
  } finally {
    await handle?.close();
  }
}

export async function writeJsonAtomic(file: string, value: unknown, mode = 0o600, durable = true): Promise<void> {
  await writeFileAtomic(file, JSON.stringify(value, null, 2) + '\n', mode, durable);
}

/** Reads and validates a JSON record; undefined when the file does not exist. */
export async function readJsonRecord<S extends z.ZodType>(file: string, schema: S): Promise<z.infer<S> | undefined> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new RecordError('record_unreadable', `cannot read record ${file}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new RecordError('record_invalid', `record ${file} is not JSON: ${(err as Error).message}`);
  }
  const result = schema.safeParse(parsed);
  if (!result.success) {
    throw new RecordError('record_invalid', `record ${file} is invalid: ${result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return result.data;
}
