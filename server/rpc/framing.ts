// A Content-Length message reader that survives bad input: malformed JSON, oversized frames
// (skipped without buffering) and unframed garbage (resynchronised at the next header), so one
// bad client write never takes the companion server down or stalls the valid requests after it.
import { AbstractMessageReader, type DataCallback, type Disposable, type Message } from 'vscode-jsonrpc/node';
import { SandboxSessionsError } from '../../protocol/errors';

/** A framing or decoding problem; `parseError` ones get a JSON-RPC ParseError reply (id null). */
export class FrameError extends SandboxSessionsError<'parse_error' | 'invalid_frame'> {
  override readonly name = 'FrameError';
  readonly service = 'rpc';
  constructor(
    message: string,
    readonly parseError: boolean,
  ) {
    super(parseError ? 'parse_error' : 'invalid_frame', message);
  }
}

const HEADER_END = Buffer.from('\r\n\r\n');
const HEADER_START = /content-length\s*:/i;

export interface FramingLimits {
  /** Largest message body accepted; larger frames are skipped and answered with ParseError. */
  maxMessageBytes: number;
  /** Largest header block accepted before the input is treated as garbage. */
  maxHeaderBytes: number;
}

export const DEFAULT_FRAMING_LIMITS: FramingLimits = { maxMessageBytes: 8 * 1024 * 1024, maxHeaderBytes: 8 * 1024 };

export class ResilientMessageReader extends AbstractMessageReader {
  private buffer: Buffer = Buffer.alloc(0);
  private bodyLength = -1;
  private skipRemaining = 0;
  private callback: DataCallback | undefined;

  constructor(
    private readonly readable: NodeJS.ReadableStream,
    private readonly limits: FramingLimits = DEFAULT_FRAMING_LIMITS,
  ) {
    super();
  }

  listen(callback: DataCallback): Disposable {
    this.callback = callback;
    const onData = (chunk: Buffer | string) => this.onData(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    const onError = (err: Error) => this.fireError(err);
    const onEnd = () => this.fireClose();
    this.readable.on('data', onData);
    this.readable.on('error', onError);
    this.readable.on('end', onEnd);
    this.readable.on('close', onEnd);
    return {
      dispose: () => {
        this.readable.off('data', onData);
        this.readable.off('error', onError);
        this.readable.off('end', onEnd);
        this.readable.off('close', onEnd);
      },
    };
  }

  private onData(chunk: Buffer): void {
    if (this.skipRemaining > 0) {
      const skipped = Math.min(this.skipRemaining, chunk.length);
      this.skipRemaining -= skipped;
      chunk = chunk.subarray(skipped);
      if (chunk.length === 0) return;
    }
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    while (this.step()) {
      // keep going while whole messages are available
    }
  }

  /** Consumes one header block or body from the buffer; false when more input is needed. */
  private step(): boolean {
    if (this.bodyLength < 0) return this.readHeader();
    if (this.buffer.length < this.bodyLength) return false;
    const body = this.buffer.subarray(0, this.bodyLength);
    this.buffer = this.buffer.subarray(this.bodyLength);
    this.bodyLength = -1;
    this.deliver(body);
    return true;
  }

  private readHeader(): boolean {
    const end = this.buffer.indexOf(HEADER_END);
    if (end === -1) {
      if (this.buffer.length > this.limits.maxHeaderBytes) this.resync(1);
      return false;
    }
    const block = this.buffer.subarray(0, end).toString('ascii');
    const length = parseContentLength(block);
    if (length === undefined) {
      // Not a header block (garbage, or a header without a usable Content-Length): skip to the next one.
      this.resync(1);
      return this.buffer.length > 0;
    }
    this.buffer = this.buffer.subarray(end + HEADER_END.length);
    if (length > this.limits.maxMessageBytes) {
      this.fireError(new FrameError(`message of ${length} bytes exceeds the ${this.limits.maxMessageBytes}-byte limit`, true));
      const skipped = Math.min(length, this.buffer.length);
      this.buffer = this.buffer.subarray(skipped);
      this.skipRemaining = length - skipped;
      return this.buffer.length > 0;
    }
    this.bodyLength = length;
    return true;
  }

  /** Drops input up to the next `Content-Length:` at or after `from`, reporting what was dropped. */
  private resync(from: number): void {
    const text = this.buffer.toString('latin1');
    HEADER_START.lastIndex = 0;
    const next = text.slice(from).search(HEADER_START);
    const keepFrom = next === -1 ? Math.max(from, this.buffer.length - 16) : from + next;
    if (keepFrom > 0) {
      this.fireError(new FrameError(`discarded ${keepFrom} bytes of input that is not a Content-Length frame`, false));
      this.buffer = this.buffer.subarray(keepFrom);
    }
  }

  private deliver(body: Buffer): void {
    let message: unknown;
    try {
      message = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
    } catch {
      this.fireError(new FrameError('message body is not valid UTF-8 JSON', true));
      return;
    }
    if (typeof message !== 'object' || message === null || Array.isArray(message)) {
      this.fireError(new FrameError('message body is not a JSON-RPC object', true));
      return;
    }
    this.callback?.(message as Message);
  }
}

function parseContentLength(block: string): number | undefined {
  let length: number | undefined;
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) return undefined;
    const key = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (key === 'content-length') {
      if (!/^\d{1,12}$/.test(value)) return undefined;
      length = Number(value);
    }
  }
  return length;
}
