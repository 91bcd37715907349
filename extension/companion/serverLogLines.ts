// The companion server writes one JSON object per line to stderr ({time, level, msg, ...fields};
// server/log.ts). vscode-languageclient would copy that stream into the log channel as raw text
// at error level, so every ordinary start looked like a failure; instead each line is logged at
// its own level as "msg key=value …". Lines that are not the server's JSON (a Node warning, a
// crash's stack) are kept as warnings: nothing the server says is dropped.
import type * as vscode from 'vscode';
import { z } from 'zod';

const ServerLogLineSchema = z.looseObject({
  level: z.enum(['debug', 'info', 'warn', 'error']),
  msg: z.string(),
  time: z.string().optional(),
});

/** `msg key=value …` for one parsed line (the channel stamps its own time). */
function describe(record: z.infer<typeof ServerLogLineSchema>): string {
  const fields = Object.entries(record)
    .filter(([k]) => k !== 'level' && k !== 'msg' && k !== 'time')
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return [record.msg, ...fields].join(' ');
}

export function logServerLine(log: vscode.LogOutputChannel, line: string): void {
  if (line.trim() === '') return;
  let parsed: z.ZodSafeParseResult<z.infer<typeof ServerLogLineSchema>> | undefined;
  try {
    parsed = ServerLogLineSchema.safeParse(JSON.parse(line));
  } catch {
    parsed = undefined;
  }
  if (!parsed?.success) {
    log.warn(`companion server: ${line}`);
    return;
  }
  log[parsed.data.level](describe(parsed.data));
}

/** Feeds a stream's chunks to {@link logServerLine} line by line (a partial line waits for its end). */
export function serverLogSink(log: vscode.LogOutputChannel): { write(chunk: Buffer | string): void; end(): void } {
  let pending = '';
  return {
    write(chunk) {
      pending += chunk.toString();
      let newline: number;
      while ((newline = pending.indexOf('\n')) !== -1) {
        logServerLine(log, pending.slice(0, newline));
        pending = pending.slice(newline + 1);
      }
    },
    end() {
      if (pending !== '') logServerLine(log, pending);
      pending = '';
    },
  };
}
