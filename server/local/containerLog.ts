// One Run's log as a container runtime keeps a Pod's log, so that reading it behaves like
// `kubectl logs`: each line stored in the kubelet CRI format `<RFC3339Nano> stdout F <line>`
// (a line longer than 16 KiB is split into `P` parts and joined again on reading, as containerd
// does), bounded by size and rotated (`runtimed.log`, `.1`, … the oldest dropped), read with the
// kubelet's rules — `tailLines` first, then `sinceTime` (lines at or after it) — and followed.
// The daemon is the only writer and writes synchronously, so a follower reads the file and
// subscribes in one step: no line is missed or delivered twice.
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';

/** containerd's default maximum line size before a line is split into partial (`P`) parts. */
export const CRI_MAX_LINE_BYTES = 16 * 1024;

export interface ContainerLogLimits {
  /** Bytes per file before it is rotated. */
  maxBytes: number;
  /** Files kept, the current one included (kubelet: containerLogMaxFiles). */
  maxFiles: number;
}
export const DEFAULT_CONTAINER_LOG_LIMITS: ContainerLogLimits = { maxBytes: 4 * 1024 * 1024, maxFiles: 3 };

export interface LogEntry {
  /** Nanoseconds since the epoch. */
  timeNs: bigint;
  content: string;
}

export interface LogReadOptions {
  tailLines?: number;
  /** Only entries at or after this time (ns since the epoch). */
  sinceNs?: bigint;
}

/** Go's time.RFC3339Nano (UTC): the fraction without trailing zeros, none when zero. */
export function formatRfc3339Nano(ns: bigint): string {
  const ms = Number(ns / 1_000_000n);
  const base = new Date(ms).toISOString().slice(0, 19);
  const frac = (ns % 1_000_000_000n).toString().padStart(9, '0').replace(/0+$/, '');
  return `${base}${frac ? `.${frac}` : ''}Z`;
}

/** The kubelet's `--timestamps` format: always nine fractional digits. */
export function formatTimestampOut(ns: bigint): string {
  const base = new Date(Number(ns / 1_000_000n)).toISOString().slice(0, 19);
  return `${base}.${(ns % 1_000_000_000n).toString().padStart(9, '0')}Z`;
}

const RFC3339_RE = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/i;

/** An RFC 3339 time (optional fraction up to ns, `Z` or an offset) as ns since the epoch; undefined if malformed. */
export function parseRfc3339Ns(text: string): bigint | undefined {
  const m = RFC3339_RE.exec(text);
  if (!m) return undefined;
  const seconds = Date.parse(`${m[1]}${m[3]?.toUpperCase()}`);
  if (!Number.isFinite(seconds)) return undefined;
  return BigInt(seconds) * 1_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'));
}

let lastNs = 0n;
/** Wall-clock ns (µs resolution), never going backwards within this process. */
export function nowNs(): bigint {
  const t = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)) * 1000n;
  lastNs = t > lastNs ? t : lastNs + 1n;
  return lastNs;
}

/** Parses one CRI line; undefined when it is not one. */
function parseCriLine(line: Buffer): { timeNs: bigint; partial: boolean; content: Buffer } | undefined {
  const s1 = line.indexOf(0x20);
  const s2 = s1 < 0 ? -1 : line.indexOf(0x20, s1 + 1);
  const s3 = s2 < 0 ? -1 : line.indexOf(0x20, s2 + 1);
  if (s3 < 0) return undefined;
  const timeNs = parseRfc3339Ns(line.subarray(0, s1).toString('latin1'));
  if (timeNs === undefined) return undefined;
  const tag = line.subarray(s2 + 1, s3).toString('latin1').split(':')[0];
  return { timeNs, partial: tag === 'P', content: line.subarray(s3 + 1) };
}

/** Entries of CRI-formatted text, partial lines joined (stamped with the time of their first part). */
export function parseCriText(text: Buffer): LogEntry[] {
  const entries: LogEntry[] = [];
  let pending: { timeNs: bigint; parts: Buffer[] } | undefined;
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf(0x0a, start);
    if (end < 0) end = text.length; // a torn last line (a crash mid-write) still counts
    const parsed = parseCriLine(text.subarray(start, end));
    start = end + 1;
    if (!parsed) continue;
    pending ??= { timeNs: parsed.timeNs, parts: [] };
    pending.parts.push(parsed.content);
    if (!parsed.partial) {
      entries.push({ timeNs: pending.timeNs, content: Buffer.concat(pending.parts).toString('utf8') });
      pending = undefined;
    }
  }
  return entries;
}

/** Applies the kubelet's order: the last `tailLines` first, then `sinceNs`. */
export function selectEntries(entries: LogEntry[], opts: LogReadOptions): LogEntry[] {
  let out = entries;
  if (opts.tailLines !== undefined) out = opts.tailLines === 0 ? [] : out.slice(-opts.tailLines);
  if (opts.sinceNs !== undefined) {
    const since = opts.sinceNs;
    out = out.filter((e) => e.timeNs >= since);
  }
  return out;
}

export class ContainerLog {
  private readonly events = new EventEmitter();
  private fd: number | undefined;
  private size = 0;
  private ended = false;

  constructor(
    readonly file: string,
    private readonly limits: ContainerLogLimits = DEFAULT_CONTAINER_LOG_LIMITS,
    private readonly clock: () => bigint = nowNs,
  ) {
    this.events.setMaxListeners(0);
  }

  /** The files that hold the log, oldest first. */
  files(): string[] {
    const rotated: string[] = [];
    for (let i = this.limits.maxFiles - 1; i >= 1; i--) rotated.push(`${this.file}.${i}`);
    return [...rotated, this.file];
  }

  private open(): number {
    if (this.fd === undefined) {
      fs.mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
      this.fd = fs.openSync(this.file, 'a', 0o600);
      this.size = fs.fstatSync(this.fd).size;
    }
    return this.fd;
  }

  private rotate(): void {
    if (this.fd !== undefined) fs.closeSync(this.fd);
    this.fd = undefined;
    const files = this.files(); // oldest first; the oldest is dropped
    fs.rmSync(files[0] as string, { force: true });
    for (let i = 1; i < files.length; i++) {
      if (fs.existsSync(files[i] as string)) fs.renameSync(files[i] as string, files[i - 1] as string);
    }
  }

  /** Appends one line (no newline inside: callers write JSON). Synchronous, so followers see it at once. */
  write(content: string): LogEntry {
    const entry: LogEntry = { timeNs: this.clock(), content };
    const stamp = formatRfc3339Nano(entry.timeNs);
    const bytes = Buffer.from(content, 'utf8');
    const parts: Buffer[] = [];
    for (let i = 0; i < bytes.length || i === 0; i += CRI_MAX_LINE_BYTES) {
      const last = i + CRI_MAX_LINE_BYTES >= bytes.length;
      parts.push(Buffer.from(`${stamp} stdout ${last ? 'F' : 'P'} `, 'latin1'), bytes.subarray(i, i + CRI_MAX_LINE_BYTES), Buffer.from('\n'));
    }
    const record = Buffer.concat(parts);
    if (this.size > 0 && this.size + record.length > this.limits.maxBytes) this.rotate();
    const fd = this.open();
    fs.writeSync(fd, record);
    this.size += record.length;
    if (this.ended) {
      fs.closeSync(fd); // a late line after the end (a command cancelled while closing): kept, no fd held
      this.fd = undefined;
    }
    this.events.emit('entry', entry);
    return entry;
  }

  /** Every retained entry, oldest first, selected as `kubectl logs` would. */
  read(opts: LogReadOptions = {}): LogEntry[] {
    const chunks: Buffer[] = [];
    for (const f of this.files()) {
      try {
        chunks.push(fs.readFileSync(f));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
    return selectEntries(parseCriText(Buffer.concat(chunks)), opts);
  }

  /** No more lines will come (the Run ended or was deleted): followers finish. */
  finish(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.fd !== undefined) fs.closeSync(this.fd);
    this.fd = undefined;
    this.events.emit('end');
  }

  get finished(): boolean {
    return this.ended;
  }

  /**
   * The selected entries, then every new one (at or after `sinceNs`) as it is written, until
   * the log finishes (`onEnd`) or the returned function is called.
   */
  follow(opts: LogReadOptions, onEntry: (e: LogEntry) => void, onEnd: () => void): () => void {
    const backlog = this.read(opts); // read and subscribe in one synchronous step
    const since = opts.sinceNs;
    const listener = (e: LogEntry): void => {
      if (since === undefined || e.timeNs >= since) onEntry(e);
    };
    const stop = (): void => {
      this.events.off('entry', listener);
      this.events.off('end', ended);
    };
    const ended = (): void => {
      stop();
      onEnd();
    };
    this.events.on('entry', listener);
    this.events.on('end', ended);
    for (const e of backlog) onEntry(e);
    if (this.ended) ended();
    return stop;
  }
}
