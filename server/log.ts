// Structured, level-filtered logging to stderr (stdout carries JSON-RPC). Values of fields that
// can hold credentials are redacted before anything is written.
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

const SECRET_KEY = /token|authorization|password|secret|credential|cookie|api[-_]?key/i;

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** Replaces credential-bearing fields (by key, at any depth) with "[redacted]". */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEY.test(k) ? '[redacted]' : redact(v, depth + 1);
  return out;
}

export function parseLogLevel(text: string | undefined): LogLevel {
  const lower = text?.trim().toLowerCase();
  return lower === 'debug' || lower === 'info' || lower === 'warn' || lower === 'error' ? lower : 'info';
}

/**
 * One JSON object per line: {time, level, msg, ...fields}. Without `level`, SANDBOX_SESSIONS_LOG_LEVEL (of `env`)
 * sets it; a value that is no level is said once, as the first line, rather than ignored without a word.
 */
export function createLogger(out: NodeJS.WritableStream = process.stderr, level?: LogLevel, env: NodeJS.ProcessEnv = process.env): Logger {
  const logger = levelLogger(out, level ?? parseLogLevel(env.SANDBOX_SESSIONS_LOG_LEVEL));
  const asked = env.SANDBOX_SESSIONS_LOG_LEVEL?.trim();
  if (level === undefined && asked && asked.toLowerCase() !== parseLogLevel(asked)) {
    logger.warn('SANDBOX_SESSIONS_LOG_LEVEL is not debug, info, warn or error; logging at info', { value: asked.slice(0, 64) });
  }
  return logger;
}

function levelLogger(out: NodeJS.WritableStream, level: LogLevel): Logger {
  const write = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[lvl] < ORDER[level]) return;
    const record = { time: new Date().toISOString(), level: lvl, msg, ...(fields ? (redact(fields) as object) : {}) };
    out.write(JSON.stringify(record, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) + '\n');
  };
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
  };
}
