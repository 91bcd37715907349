// Downloads exported artifacts of a kruntimes Run the way `krt artifact download` does (spec §5 (b)):
// a server-streaming gRPC call `artifact.v1.ArtifactService/Download` to runtimed's port 9093,
// reached through a Kubernetes port-forward (hence plain, unauthenticated gRPC on loopback: the
// API server's port-forward RBAC is the access control). The first message's metadata must match
// the Run's ArtifactRef, the bytes are verified against its size and digest before they are kept,
// and gRPC statuses become SandboxErrors that say what to do.
import { Client, credentials, status as GrpcStatus, type ClientReadableStream } from '@grpc/grpc-js';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import {
  ARTIFACT_CHUNK_BYTES,
  ARTIFACT_DOWNLOAD_PATH,
  ARTIFACT_SERVICE_NAME,
  DIRECTORY_ARTIFACT_SUFFIX,
  type ArtifactMetadata,
  DownloadRequestSchema,
  DownloadResponseSchema,
} from '../../../protocol/kruntimes/artifactService';
import type { ArtifactRef } from '../../../protocol/kruntimes/run';
import type { DownloadedArtifact } from '../../../protocol/sandboxes';
import { unpackTarGz, writeVerified } from '../artifactFiles';
import { SandboxError } from '../provider';
import { type DecodedDownloadResponse, decodeDownloadResponse, encodeDownloadRequest } from './artifactServiceDefinition';

export interface ArtifactDownloadOptions {
  /** `host:port` of runtimed's artifact service, normally a local port-forward (`127.0.0.1:<port>`). */
  address: string;
  namespace: string;
  runName: string;
  /** The ref from the Run's `status.artifactRefs`: what the download must match. */
  ref: ArtifactRef;
  /** An absolute directory; created when missing. */
  destinationDir: string;
  /** Unpack a directory artifact into `<destinationDir>/<name>/` instead of keeping `<name>.tar.gz`. */
  unpack: boolean;
  signal?: AbortSignal;
  /** Bytes of this artifact received and written so far. */
  onProgress?: (bytes: number) => void;
  /** Give up when runtimed sends nothing for this long (default 60 s). */
  idleTimeoutMs?: number;
}

const DEFAULT_IDLE_TIMEOUT_MS = 60_000;
/** Chunks are ≤ 64 KiB; anything far larger is not runtimed speaking (grpc-js refuses it). */
const MAX_MESSAGE_BYTES = 16 * ARTIFACT_CHUNK_BYTES;

const GrpcErrorSchema = z.object({ code: z.number().int(), details: z.string() });

/** The file name an artifact is saved under: directories as `<name>.tar.gz`, as the CLI does. */
export function artifactFileName(ref: Pick<ArtifactRef, 'name' | 'type'>): string {
  const name = ref.name;
  if (name === '' || name === '.' || name === '..' || /[/\\\0]/.test(name)) {
    throw new SandboxError('artifact_invalid', `artifact name ${JSON.stringify(name)} is not a plain file name; it cannot be saved`);
  }
  return ref.type === 'directory' ? `${name}${DIRECTORY_ARTIFACT_SUFFIX}` : name;
}

function describe(options: Pick<ArtifactDownloadOptions, 'namespace' | 'runName' | 'ref'>): string {
  return `artifact ${JSON.stringify(options.ref.name)} of Run ${options.namespace}/${options.runName}`;
}

/** A gRPC status from runtimed as a SandboxError carrying runtimed's own message. */
function fromGrpcError(err: unknown, options: ArtifactDownloadOptions): SandboxError | undefined {
  const parsed = GrpcErrorSchema.safeParse(err);
  if (!parsed.success) return undefined;
  const { code, details } = parsed.data;
  const what = describe(options);
  switch (code) {
    case GrpcStatus.NOT_FOUND:
      return new SandboxError('sandbox_not_found', `runtimed has no ${what}: ${details}`);
    case GrpcStatus.PERMISSION_DENIED:
      return new SandboxError(
        'artifact_invalid',
        `runtimed at ${options.address} refused to serve ${what}: ${details} (the port-forward must reach a runtimed Pod of the Run's own Runtime and namespace)`,
      );
    case GrpcStatus.INVALID_ARGUMENT:
      return new SandboxError('artifact_invalid', `runtimed refused the download request for ${what}: ${details}`);
    case GrpcStatus.UNAVAILABLE:
      return new SandboxError(
        'provider_unavailable',
        `cannot reach runtimed's artifact service at ${options.address} (${details}); check that the port-forward to a Ready runtimed Pod is open, then retry`,
      );
    case GrpcStatus.UNIMPLEMENTED:
      return new SandboxError(
        'provider_unavailable',
        `runtimed at ${options.address} does not serve ${ARTIFACT_SERVICE_NAME} (${details}); this kruntimes version cannot download artifacts over gRPC — read the artifact store (S3 or the PVC) directly`,
      );
    default:
      return new SandboxError('provider_unavailable', `runtimed could not serve ${what}: ${GrpcStatus[code] ?? `status ${code}`}: ${details}; retry later`);
  }
}

/** Checks the first message against the Run's ref; every mismatch names both values. */
function checkMetadata(metadata: ArtifactMetadata, options: ArtifactDownloadOptions): void {
  const { ref } = options;
  const expected: [string, string | number, string | number][] = [
    ['name', metadata.name, ref.name],
    ['type', metadata.type, ref.type],
    ['size', metadata.size_bytes, ref.sizeBytes],
    ['digest', metadata.digest, ref.digest],
  ];
  const wrong = expected.filter(([, got, want]) => got !== want).map(([field, got, want]) => `${field} ${JSON.stringify(got)} instead of ${JSON.stringify(want)}`);
  if (wrong.length) {
    throw new SandboxError('artifact_invalid', `runtimed describes ${describe(options)} differently from the Run's status: ${wrong.join(', ')}; nothing was kept`);
  }
}

/** One validated stream message. */
function message(decoded: DecodedDownloadResponse, options: ArtifactDownloadOptions) {
  const parsed = decoded.ok ? DownloadResponseSchema.safeParse(decoded.value) : undefined;
  if (!parsed?.success) {
    const why = decoded.ok ? (parsed?.error.issues.map((i) => i.message).join('; ') ?? 'invalid') : decoded.error;
    throw new SandboxError('artifact_invalid', `runtimed sent an invalid download message for ${describe(options)}: ${why}`);
  }
  return parsed.data;
}

/**
 * Downloads one artifact into `destinationDir`, verified against the ref's size and digest (the
 * file appears only once verified; nothing is left on failure or abort), and unpacks a directory
 * artifact when asked, in place of its archive (which is removed, also when the unpacker refuses it). An existing file of the
 * same name is replaced, like an earlier unpacked tree.
 */
export async function downloadArtifact(options: ArtifactDownloadOptions): Promise<DownloadedArtifact> {
  const { ref, signal } = options;
  if (!path.isAbsolute(options.destinationDir)) {
    throw new SandboxError('invalid_destination', `the destination must be an absolute path: ${options.destinationDir}`);
  }
  signal?.throwIfAborted();
  const target = path.join(options.destinationDir, artifactFileName(ref));
  const request = DownloadRequestSchema.parse({ namespace: options.namespace, run_name: options.runName, artifact_name: ref.name });
  await fsp.mkdir(options.destinationDir, { recursive: true });

  const client = new Client(options.address, credentials.createInsecure(), {
    'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    'grpc.enable_retries': 0,
  });
  let call: ClientReadableStream<DecodedDownloadResponse> | undefined;
  let stalled = false;
  let idleTimer: NodeJS.Timeout | undefined;
  const idleMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const touch = () => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => {
      stalled = true;
      call?.cancel();
    }, idleMs);
  };
  const onAbort = () => call?.cancel();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    call = client.makeServerStreamRequest(ARTIFACT_DOWNLOAD_PATH, encodeDownloadRequest, decodeDownloadResponse, request, {});
    touch();
    const stream = call[Symbol.asyncIterator]() as AsyncIterator<DecodedDownloadResponse>;
    const first = await stream.next();
    if (first.done) throw new SandboxError('artifact_invalid', `runtimed ended the download of ${describe(options)} without sending its metadata`);
    const head = message(first.value, options);
    if (!head.metadata) throw new SandboxError('artifact_invalid', `runtimed sent data before the metadata of ${describe(options)}`);
    checkMetadata(head.metadata, options);

    let received = 0;
    options.onProgress?.(0);
    const data = async function* (): AsyncGenerator<Uint8Array> {
      for (;;) {
        const next = await stream.next();
        if (next.done) return;
        touch();
        const m = message(next.value, options);
        if (!m.data) throw new SandboxError('artifact_invalid', `runtimed sent the metadata of ${describe(options)} twice`);
        yield m.data;
        received += m.data.length;
        options.onProgress?.(received);
      }
    };
    await writeVerified(data(), target, { digest: ref.digest, sizeBytes: ref.sizeBytes }, signal);
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    if (stalled) {
      throw new SandboxError(
        'provider_unavailable',
        `runtimed at ${options.address} sent nothing for ${Math.round(idleMs / 1000)} s while downloading ${describe(options)}; the download was stopped and nothing was kept`,
      );
    }
    throw fromGrpcError(err, options) ?? err;
  } finally {
    clearTimeout(idleTimer);
    signal?.removeEventListener('abort', onAbort);
    call?.cancel(); // a no-op once the stream ended; stops runtimed sending after a refusal
    client.close();
  }

  const result: DownloadedArtifact = { name: ref.name, path: target, type: ref.type, sizeBytes: ref.sizeBytes, digest: ref.digest };
  if (options.unpack && ref.type === 'directory') {
    const dir = path.join(options.destinationDir, ref.name);
    // The archive is consumed (removed once unpacked, or when refused: all or nothing): the folder
    // artifact arrives once, as the folder.
    await unpackTarGz(target, dir, signal);
    result.path = dir;
    result.unpackedTo = dir;
  }
  return result;
}

export interface ArtifactsDownloadOptions extends Omit<ArtifactDownloadOptions, 'ref' | 'onProgress'> {
  /** The Run's `status.artifactRefs`. */
  refs: ArtifactRef[];
  /** Only these artifacts (every name must exist); all when absent. */
  names?: string[];
  onProgress?: (progress: { artifact: string; bytes: number; doneBytes: number; totalBytes: number }) => void;
}

/** Downloads the selected artifacts one after another, reporting overall progress. */
export async function downloadArtifacts(options: ArtifactsDownloadOptions): Promise<DownloadedArtifact[]> {
  const { refs: all, names, onProgress, ...common } = options;
  const refs = names ? all.filter((r) => names.includes(r.name)) : all;
  if (names) {
    const missing = names.filter((n) => !all.some((r) => r.name === n));
    if (missing.length) throw new SandboxError('sandbox_not_found', `Run ${options.namespace}/${options.runName} has no artifact named ${missing.join(', ')}`);
  }
  // Two artifacts must not land on one path (a file `x.tar.gz` beside a directory `x`).
  const paths = new Map<string, string>();
  for (const ref of refs) {
    for (const p of [artifactFileName(ref), ...(options.unpack && ref.type === 'directory' ? [ref.name] : [])]) {
      const other = paths.get(p);
      if (other !== undefined) throw new SandboxError('artifact_invalid', `artifacts ${JSON.stringify(other)} and ${JSON.stringify(ref.name)} would both be saved as ${p}`);
      paths.set(p, ref.name);
    }
  }
  const totalBytes = refs.reduce((n, r) => n + r.sizeBytes, 0);
  let doneBytes = 0;
  const results: DownloadedArtifact[] = [];
  for (const ref of refs) {
    options.signal?.throwIfAborted();
    const base = doneBytes;
    results.push(
      await downloadArtifact({
        ...common,
        ref,
        ...(onProgress ? { onProgress: (bytes: number) => onProgress({ artifact: ref.name, bytes, doneBytes: base + bytes, totalBytes }) } : {}),
      }),
    );
    doneBytes += ref.sizeBytes;
  }
  return results;
}
