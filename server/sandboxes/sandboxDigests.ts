// The SHA-256 of files inside a sandbox, computed there: comparing a remote sandbox's file with a copy here then
// moves 64 hex digits through the gateway instead of the file. GNU `sha256sum -z` (coreutils 8.30 or later) answers
// with NUL-terminated records, names printed as they are, whatever bytes they hold; a `sha256sum` without `-z`
// (BusyBox's, as in Alpine; older coreutils) answers a line per file, so it is asked only about names without a
// newline or a backslash (which GNU's would escape), and the others are left for the caller to read. An image with
// neither answers `undefined` and the caller reads the files instead.
import posix from 'node:path/posix';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { forEachConcurrently } from './transfer';

/** Paths per command, and their bytes: argv and the answer stay far below the 1 MiB request and output caps. */
const BATCH_PATHS = 200;
const BATCH_BYTES = 128 * 1024;
/** Commands in flight: hashing is the sandbox's CPU and disk, the gateway only carries the answers. */
const CONCURRENCY = 2;

const RECORD = /^([0-9a-f]{64}) [ *]/;

/** How the sandbox's sha256sum answers: NUL-terminated records (`-z`), or one line per file. */
type Records = 'nul' | 'lines';

/** How each sandbox's sha256sum answered last (comparisons repeat while a sandbox changes): asked that way first. */
const answers = new WeakMap<GatewayClient, Records>();

/**
 * Hashes `paths` (relative to the sandbox's root, where its commands start) in the sandbox. Answers path → lowercase
 * hex digest for every file it could read — a path that is gone or not a regular file is left out, and so, where
 * sha256sum has no `-z`, is a name with a newline or a backslash — or undefined when the sandbox cannot hash at all
 * (no `sha256sum`).
 */
export async function sha256InSandbox(client: GatewayClient, paths: readonly string[], signal?: AbortSignal): Promise<Map<string, string> | undefined> {
  const digests = new Map<string, string>();
  const [first, ...rest] = batchesOf(paths);
  if (first === undefined) return digests;
  // The first batch tells which answer the sandbox's sha256sum gives (`-z`, or else lines), unless it told already.
  let records: Records = answers.get(client) ?? 'nul';
  let answered = await hashBatch(client, first, records, signal);
  if (answered === undefined && records === 'nul') {
    records = 'lines';
    answered = await hashBatch(client, first, records, signal);
  }
  if (answered === undefined) return undefined;
  answers.set(client, records);
  let unable = false;
  const keep = (found: Map<string, string>) => {
    for (const [p, digest] of found) digests.set(p, digest);
  };
  keep(answered);
  await forEachConcurrently(
    rest,
    CONCURRENCY,
    async (batch) => {
      if (unable) return;
      const found = await hashBatch(client, batch, records, signal);
      if (found === undefined) unable = true;
      else keep(found);
    },
    signal,
  );
  return unable ? undefined : digests;
}

/** One sha256sum command over `batch`: the digests it answered, or undefined for an answer that cannot be trusted or used. */
async function hashBatch(client: GatewayClient, batch: readonly string[], records: Records, signal: AbortSignal | undefined): Promise<Map<string, string> | undefined> {
  // A line cannot tell a newline in a name from the next record, and GNU's escapes a name with a backslash.
  const asked = records === 'nul' ? batch : batch.filter((p) => !p.includes('\n') && !p.includes('\\'));
  if (asked.length === 0) return new Map();
  // `./` keeps a name that starts with `-` a name; `--` ends the options all the same.
  const argv = ['sha256sum', ...(records === 'nul' ? ['-z'] : []), '--', ...asked.map((p) => `./${p}`)];
  const out = await client.runCommand({ argv }, signal ? { signal } : {});
  const answered = out.exitCode === 0 || out.exitCode === 1 ? parseRecords(out.stdout, asked, records === 'nul' ? '\0' : '\n') : undefined;
  // Exit 1 with no record at all is a sha256sum that refused its options (or a batch whose files are all gone,
  // which a copy then reports as it would have).
  return answered === undefined || (out.exitCode !== 0 && answered.size === 0) ? undefined : answered;
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

/** `<hex>  ./<path>` and `end` per file read; undefined if any record is not one of those (an answer not to be trusted). */
function parseRecords(stdout: Buffer, batch: readonly string[], end: '\0' | '\n'): Map<string, string> | undefined {
  const asked = new Set(batch);
  const digests = new Map<string, string>();
  for (const record of stdout.toString('utf8').split(end)) {
    if (record === '') continue;
    const match = RECORD.exec(record);
    const name = match ? posix.normalize(record.slice(66)) : undefined;
    if (!match || name === undefined || !asked.has(name)) return undefined;
    digests.set(name, match[1] as string);
  }
  return digests;
}
