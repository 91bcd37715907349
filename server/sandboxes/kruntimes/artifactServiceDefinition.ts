// The grpc-js service definition of runtimed's `artifact.v1.ArtifactService`, built once from the
// proto text in protocol/ with protobufjs (the server is one esbuild bundle: no .proto file to load
// at run time, no generated code to keep in sync). The client side decodes into plain objects and
// leaves validation to the protocol schemas; the server side (the simulator in test fixtures) uses
// the same definition so both ends share one codec.
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import {
  ARTIFACT_DOWNLOAD_PATH,
  ARTIFACT_SERVICE_PROTO,
  ArtifactMessageNames,
  type ArtifactMetadataInput,
  type DownloadRequest,
  DownloadRequestSchema,
} from '../../../protocol/kruntimes/artifactService';

/** A response as a server writes it: metadata first, then data chunks. */
export type DownloadResponseInput = { metadata: ArtifactMetadataInput; data?: undefined } | { data: Uint8Array; metadata?: undefined };

/**
 * A received message before validation: the decoded object, or why the bytes did not decode (kept
 * as a value so the caller reports it as an invalid artifact stream rather than a transport error).
 */
export type DecodedDownloadResponse = { ok: true; value: unknown } | { ok: false; error: string };

interface Codec {
  request: protobuf.Type;
  response: protobuf.Type;
}

let codec: Codec | undefined;

function types(): Codec {
  if (!codec) {
    const { root } = protobuf.parse(ARTIFACT_SERVICE_PROTO, { keepCase: true });
    codec = { request: root.lookupType(ArtifactMessageNames.request), response: root.lookupType(ArtifactMessageNames.response) };
  }
  return codec;
}

/** int64 as decimal strings, bytes as the decoded Buffer, absent fields left out. */
const CONVERSION: protobuf.IConversionOptions = { longs: String, defaults: false };

function encode(type: protobuf.Type, value: object): Buffer {
  return Buffer.from(type.encode(type.fromObject(value)).finish());
}

function decodeObject(type: protobuf.Type, bytes: Buffer): Record<string, unknown> {
  return type.toObject(type.decode(bytes), CONVERSION);
}

export function encodeDownloadRequest(request: DownloadRequest): Buffer {
  return encode(types().request, request);
}

/** Server side: the request as decoded, absent strings as "" (validated by the caller). */
export function decodeDownloadRequest(bytes: Buffer): unknown {
  const { request } = types();
  return request.toObject(request.decode(bytes), { defaults: true });
}

export function encodeDownloadResponse(response: DownloadResponseInput): Buffer {
  return encode(types().response, response);
}

export function decodeDownloadResponse(bytes: Buffer): DecodedDownloadResponse {
  try {
    return { ok: true, value: decodeObject(types().response, bytes) };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * The service as a server registers it (`Server.addService`). Requests are handed over decoded but
 * unvalidated (proto3 empty strings as ""), so the handler can answer InvalidArgument as runtimed does.
 * Clients call {@link ARTIFACT_DOWNLOAD_PATH} with the encode/decode functions above instead.
 */
export function artifactServiceDefinition(): ServiceDefinition {
  const download: MethodDefinition<unknown, DownloadResponseInput> = {
    path: ARTIFACT_DOWNLOAD_PATH,
    requestStream: false,
    responseStream: true,
    requestSerialize: (value: unknown) => encodeDownloadRequest(DownloadRequestSchema.parse(value)),
    requestDeserialize: decodeDownloadRequest,
    responseSerialize: encodeDownloadResponse,
    responseDeserialize: () => {
      throw new Error('the server-side definition does not decode responses; use decodeDownloadResponse');
    },
  };
  return { Download: download };
}
