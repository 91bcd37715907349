// Request and response bodies with the gateway's byte limits: a request body over the cap is
// a 413 `gateway request body exceeds configured limit` (read no further); a JSON response
// over the cap is replaced, before any byte is sent, by exactly
// `{"error":"gateway response exceeds configured limit"}\n`. Bodies are Go-encoded JSON.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { GatewayMessages, JSON_CONTENT_TYPE } from '../../protocol/kruntimes/gateway';
import { encodeGoJson, stringifyWithBigInts, escapeGoHtml } from '../../protocol/kruntimes/goJson';
import { SandboxSessionsError } from '../../protocol/errors';

export class BodyTooLargeError extends SandboxSessionsError<'body_too_large'> {
  override readonly name = 'BodyTooLargeError';
  readonly service = 'local-gateway';
  constructor(message: string) {
    super('body_too_large', message);
  }
}

/** Reads the whole body, refusing more than `limit` bytes (bounded: also by `timeoutMs`). */
export function readBody(req: IncomingMessage, limit: number, timeoutMs = 30_000): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(new BodyTooLargeError(GatewayMessages.requestTooLarge));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error('request body was not received in time'));
    }, timeoutMs);
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        clearTimeout(timer);
        req.removeAllListeners('data');
        req.pause();
        reject(new BodyTooLargeError(GatewayMessages.requestTooLarge));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** Go json.Encoder bytes; bigint fields (lastActivityUnixNano) are written as integers. */
export function goJsonBytes(value: unknown): Buffer {
  const text = hasBigInt(value) ? escapeGoHtml(stringifyWithBigInts(value)) + '\n' : encodeGoJson(value);
  return Buffer.from(text, 'utf8');
}

function hasBigInt(value: unknown): boolean {
  if (typeof value === 'bigint') return true;
  if (value && typeof value === 'object') return Object.values(value).some(hasBigInt);
  return false;
}

export function sendJson(res: ServerResponse, status: number, value: unknown, responseLimit: number, extraHeaders: Record<string, string> = {}): void {
  let body = goJsonBytes(value);
  let code = status;
  if (body.length > responseLimit) {
    body = goJsonBytes({ error: GatewayMessages.responseTooLarge });
    code = 413;
  }
  res.writeHead(code, { 'Content-Type': JSON_CONTENT_TYPE, 'Content-Length': String(body.length), ...extraHeaders });
  res.end(body);
}

export function sendError(res: ServerResponse, status: number, message: string, extraHeaders: Record<string, string> = {}): void {
  // Error bodies are small; the response cap never replaces them.
  const body = goJsonBytes({ error: message });
  res.writeHead(status, { 'Content-Type': JSON_CONTENT_TYPE, 'Content-Length': String(body.length), ...extraHeaders });
  res.end(body);
}
