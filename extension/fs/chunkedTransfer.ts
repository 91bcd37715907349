// Reading and writing a file larger than one gateway call (786,000 bytes read, 1 MiB request): ranged reads
// where the gateway offers them, else `dd` in the sandbox; writes as part files joined in the sandbox and
// checked against their SHA-256. Apart from SandboxFiles, which decides when a transfer needs parts.
import { randomBytes, createHash } from 'node:crypto';
import path from 'node:path/posix';
import { GatewayLimits } from '../../protocol/kruntimes/gateway';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { FsError } from './fsError';
import { parentOf } from './sandboxPaths';

/** What a chunked transfer needs of SandboxFiles: its mapped, retried gateway calls, counters and chunk size. */
export interface ChunkedIo {
  call<T>(fn: (client: GatewayClient) => Promise<T>, p: string): Promise<T>;
  counters: { reads: number; mutations: number };
  chunkBytes: number;
}

/** Reads `size` bytes of `p` in parts: ranged reads when `ranged`, else `dd` blocks in the sandbox. */
export async function readChunked(io: ChunkedIo, p: string, size: number, ranged: boolean): Promise<Uint8Array> {
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset < size) {
    const length = Math.min(io.chunkBytes, GatewayLimits.maxReadBytes, size - offset);
    io.counters.reads += 1;
    const chunk = ranged
      ? (await io.call((c) => c.read(p, { maxBytes: length, offset, length }), p)).contents
      : await readBlocksWithDd(io, p, offset, length);
    if (chunk.length === 0) break;
    parts.push(chunk);
    offset += chunk.length;
  }
  const data = Buffer.concat(parts);
  if (data.length !== size) throw new FsError('Unavailable', `${p} changed while it was read in parts (${data.length} of ${size} bytes)`);
  return data;
}

async function readBlocksWithDd(io: ChunkedIo, p: string, offset: number, length: number): Promise<Buffer> {
  const block = 4096;
  const out = await io.call(
    (c) =>
      c.runCommand({
        argv: ['dd', `if=${p}`, `bs=${block}`, `skip=${offset / block}`, `count=${Math.ceil(length / block)}`, 'status=none'],
      }),
    p,
  );
  if (out.exitCode !== 0) {
    throw new FsError('Unavailable', `${p} is larger than one gateway call and reading it in parts failed: ${out.stderr.toString().trim() || `exit ${out.exitCode}`}`);
  }
  return out.stdout;
}

/** Writes part files of ≤ one call each, then joins them in the sandbox, checking the SHA-256. */
export async function writeChunked(io: ChunkedIo, client: GatewayClient, p: string, data: Uint8Array): Promise<void> {
  const dir = parentOf(p);
  const nonce = randomBytes(6).toString('hex');
  const partName = (i: number) => path.join(dir, `.${path.basename(p)}.sandbox-upload-${nonce}.${i}`);
  const parts: string[] = [];
  const chunk = Math.min(io.chunkBytes, GatewayLimits.maxWriteBytes);
  try {
    for (let offset = 0, i = 0; offset < data.byteLength; offset += chunk, i++) {
      const name = partName(i);
      io.counters.mutations += 1;
      await io.call((c) => c.writeFile(name, data.subarray(offset, offset + chunk), { createParents: false }), p);
      parts.push(name);
    }
    await joinParts(io, p, partName(parts.length), createHash('sha256').update(data).digest('hex'), parts);
  } catch (err) {
    for (const part of parts) await client.deleteFile(part).catch(() => undefined);
    throw err;
  }
}

async function joinParts(io: ChunkedIo, p: string, tmp: string, digest: string, parts: string[]): Promise<void> {
  const script =
    'set -e; dest="$1"; tmp="$2"; want="$3"; shift 3; cat -- "$@" > "$tmp"; ' +
    'got=$(sha256sum -- "$tmp" | cut -d" " -f1); ' +
    'if [ "$got" != "$want" ]; then rm -f -- "$tmp"; echo "checksum mismatch" >&2; exit 3; fi; ' +
    'mv -f -- "$tmp" "$dest"; rm -f -- "$@"';
  io.counters.mutations += 1;
  const out = await io.call((c) => c.runCommand({ argv: ['sh', '-c', script, 'sh', p, tmp, digest, ...parts] }), p);
  if (out.exitCode !== 0) {
    throw new FsError(
      'Unavailable',
      `${p} is larger than one gateway call (${GatewayLimits.maxWriteBytes} bytes) and joining its parts in the sandbox failed ` +
        `(the runtime image needs sh, cat and sha256sum): ${out.stderr.toString().trim() || `exit ${out.exitCode}`}`,
    );
  }
}
