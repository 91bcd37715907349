// The SHA-256 of files inside a sandbox, computed there: comparing a remote sandbox's file with a copy here then
// moves 64 hex digits through the gateway instead of the file. It needs GNU `sha256sum` with `-z` (coreutils 8.30 or
// later: NUL-terminated records and names printed as they are, whatever bytes they hold); an image without it
// answers `undefined` and the caller reads the files instead.
import posix from 'node:path/posix';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { forEachConcurrently } from './transfer';

/** Paths per command, and their bytes: argv and the answer stay far below the 1 MiB request and output caps. */
const BATCH_PATHS = 200;
const BATCH_BYTES = 128 * 1024;
/** Commands in flight: hashing is the sandbox's CPU and disk, the gateway only carries the answers. */
const CONCURRENCY = 2;

const RECORD = /^([0-9a-f]{64}) [ *]/;

/**
 * Hashes `paths` (relative to the sandbox's root, where its commands start) in the sandbox. Answers path → lowercase
 * hex digest for every file it could read — a path that is gone or not a regular file is left out — or undefined
 * when the sandbox cannot hash at all (no `sha256sum`, or one without `-z`).
 */
export async function sha256InSandbox(client: GatewayClient, paths: readonly string[], signal?: AbortSignal): Promise<Map<string, string> | undefined> {
  const digests = new Map<string, string>();
  let unable = false;
  await forEachConcurrently(
    batchesOf(paths),
    CONCURRENCY,
    async (batch) => {
      if (unable) return;
      // `./` keeps a name that starts with `-` a name; `--` ends the options all the same.
      const out = await client.runCommand({ argv: ['sha256sum', '-z', '--', ...batch.map((p) => `./${p}`)] }, signal ? { signal } : {});
      const answered = out.exitCode === 0 || out.exitCode === 1 ? parseRecords(out.stdout, batch) : undefined;
      // Exit 1 with no record at all is a sha256sum that refused its options (or a batch whose files are all gone,
      // which a copy then reports as it would have).
      if (answered === undefined || (out.exitCode !== 0 && answered.size === 0)) unable = true;
      else for (const [p, digest] of answered) digests.set(p, digest);
    },
    signal,
  );
  return unable ? undefined : digests;
}

function batchesOf(paths: readonly string[]): string[][] {
  const batches: string[][] = [];
  let current: string[] = [];
  let bytes = 0;
  for (const p of paths) {
    const size = Buffer.byteLength(p) + 3;
    if (current.length > 0 && (current.length >= BATCH_PATHS || bytes + size > BATCH_BYTES)) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(p);
    bytes += size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/** `<hex>  ./<path>\0` per file read; undefined if any record is not one of those (an answer not to be trusted). */
function parseRecords(stdout: Buffer, batch: readonly string[]): Map<string, string> | undefined {
  const asked = new Set(batch);
  const digests = new Map<string, string>();
  for (const record of stdout.toString('utf8').split('\0')) {
    if (record === '') continue;
    const match = RECORD.exec(record);
    const name = match ? posix.normalize(record.slice(66)) : undefined;
    if (!match || name === undefined || !asked.has(name)) return undefined;
    digests.set(name, match[1] as string);
  }
  return digests;
}
