// runtimed's artifact download contract (`artifact.v1.ArtifactService/Download`, spec §5 (b)): what
// `krt artifact download` calls through a port-forward to port 9093 of a Ready runtimed Pod. The
// proto text lives here as a string so the bundled server needs no .proto file next to it; the
// decoded messages are parsed with these schemas before anything trusts them. Field numbers are
// kruntimes' own (`api/artifact/v1/artifact.proto`); no protobuf library is imported here, so the
// extension bundle never pulls one in.
import { z } from 'zod';

/** The proto package and service, exactly as runtimed registers them. */
export const ARTIFACT_SERVICE_NAME = 'artifact.v1.ArtifactService';
/** The gRPC method path of the server-streaming download. */
export const ARTIFACT_DOWNLOAD_PATH = `/${ARTIFACT_SERVICE_NAME}/Download`;
/** runtimed's status/artifact gRPC port on the Pod (unauthenticated: reached only by port-forward). */
export const RUNTIMED_ARTIFACT_PORT = 9093;
/** runtimed sends data in chunks of at most this many bytes. */
export const ARTIFACT_CHUNK_BYTES = 64 * 1024;
/** What a directory artifact is stored as (deterministic tar.gz) and the suffix the CLI saves it with. */
export const DIRECTORY_ARTIFACT_CONTENT_TYPE = 'application/gzip';
export const DIRECTORY_ARTIFACT_SUFFIX = '.tar.gz';

/**
 * The service definition. `DownloadResponse` keeps kruntimes' shape — two plain fields, metadata on
 * the first message only, data on the others — rather than a `oneof`: the bytes on the wire are the
 * same, and decoding both fields lets a client refuse a message that sets both (a oneof decoder
 * would silently keep the last one).
 */
export const ARTIFACT_SERVICE_PROTO = `
syntax = "proto3";

package artifact.v1;

service ArtifactService {
  rpc Download(DownloadRequest) returns (stream DownloadResponse);
}

message DownloadRequest {
  string namespace = 1;
  string run_name = 2;
  string artifact_name = 3;
}

message ArtifactMetadata {
  string name = 1;
  string type = 2;
  string content_type = 3;
  int64 size_bytes = 4;
  string digest = 5;
}

message DownloadResponse {
  ArtifactMetadata metadata = 1;
  bytes data = 2;
}
`;

/** Fully qualified message names inside {@link ARTIFACT_SERVICE_PROTO}. */
export const ArtifactMessageNames = {
  request: 'artifact.v1.DownloadRequest',
  response: 'artifact.v1.DownloadResponse',
} as const;

/** A request as sent (runtimed answers InvalidArgument when any field is empty). */
export const DownloadRequestSchema = z.strictObject({
  namespace: z.string().min(1),
  run_name: z.string().min(1),
  artifact_name: z.string().min(1),
});
export type DownloadRequest = z.infer<typeof DownloadRequestSchema>;

/**
 * proto3 int64 decoded as a decimal string (protobuf decoders give strings for 64-bit integers);
 * a size must be a non-negative safe integer here.
 */
const SizeBytesSchema = z
  .union([z.string().regex(/^\d{1,16}$/, 'must be a non-negative decimal integer'), z.number().int().min(0)])
  .transform((v) => Number(v))
  .refine((n) => Number.isSafeInteger(n), 'must be at most 2^53-1');

/** proto3 omits empty/zero fields on the wire, so every field defaults. */
export const ArtifactMetadataSchema = z.strictObject({
  name: z.string().default(''),
  type: z.string().default(''),
  content_type: z.string().default(''),
  size_bytes: SizeBytesSchema.default(0),
  digest: z.string().default(''),
});
export type ArtifactMetadata = z.infer<typeof ArtifactMetadataSchema>;
/** The metadata as a server would write it (size may be a number or an int64 decimal string). */
export type ArtifactMetadataInput = z.input<typeof ArtifactMetadataSchema>;

/** One decoded stream message: exactly one of metadata or (non-empty) data. */
export const DownloadResponseSchema = z
  .strictObject({
    metadata: ArtifactMetadataSchema.optional(),
    data: z.instanceof(Uint8Array).optional(),
  })
  .refine((m) => (m.metadata !== undefined) !== (m.data !== undefined && m.data.length > 0), {
    message: 'a download message carries exactly one of metadata or non-empty data',
  });
export type DownloadResponse = z.infer<typeof DownloadResponseSchema>;
