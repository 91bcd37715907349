// The commands run from this window's Sandbox terminals and sandbox tasks, with their output, kept
// in memory (bounded: the newest 200, at most 256 KiB of output each and 8 MiB in all) and keyed by
// operation id — so the Operations view can re-run a command and open its output. runtimed's
// audit lines hold neither the command text nor an operation id (upstream keeps them out on
// purpose), so an Operations row finds its command by time: a sandbox runs one mutation at a time,
// so the row's [logged − duration, logged] lies inside exactly one command's [sent, answered]
// (with a little slack for clocks). No VS Code API here, so it is unit-testable.

export const MAX_COMMANDS = 200;
export const MAX_OUTPUT_BYTES = 256 * 1024;
export const MAX_TOTAL_BYTES = 8 * 1024 * 1024;
/** How far the log's clock and this window's may disagree when a row is matched to a command. */
const MATCH_SLACK_MS = 2000;

export interface WindowCommand {
  /** The operation id the gateway assigned (`accepted`); a fallback id before it is known. */
  operationId: string;
  sandboxKey: string;
  command: string;
  /** Workspace-relative working directory ("" = the root). */
  cwd: string;
  /** Where it ran: `terminal` or `task`. */
  from: 'terminal' | 'task';
  startedAt: number;
  endedAt?: number;
  exitCode?: number;
  /** How it ended, as the terminal saw it. */
  ending?: 'completed' | 'timed out' | 'cancelled' | 'failed';
  output: string;
  truncated: boolean;
}

/** What a terminal tells about one command while it runs. */
export interface CommandCapture {
  accepted(operationId: string): void;
  output(text: string): void;
  finished(ending: NonNullable<WindowCommand['ending']>, exitCode?: number): void;
}

let fallbackIds = 0;

export class WindowCommands {
  /** Oldest first. */
  private readonly commands: WindowCommand[] = [];
  private totalBytes = 0;

  /** Starts recording a command sent to the sandbox `sandboxKey`. */
  start(sandboxKey: string, command: string, cwd: string, from: WindowCommand['from'], now = Date.now()): CommandCapture {
    const record: WindowCommand = { operationId: `window-${++fallbackIds}`, sandboxKey, command, cwd, from, startedAt: now, output: '', truncated: false };
    this.commands.push(record);
    this.trim();
    return {
      accepted: (id) => {
        record.operationId = id;
      },
      output: (text) => {
        if (record.truncated) return;
        const room = MAX_OUTPUT_BYTES - Buffer.byteLength(record.output);
        const bytes = Buffer.byteLength(text);
        const kept = bytes <= room ? text : Buffer.from(text).subarray(0, room).toString('utf8');
        record.output += kept;
        record.truncated = bytes > room;
        this.totalBytes += Buffer.byteLength(kept);
        this.trim();
      },
      finished: (ending, exitCode) => {
        record.endedAt = Date.now();
        record.ending = ending;
        if (exitCode !== undefined) record.exitCode = exitCode;
      },
    };
  }

  private trim(): void {
    while (this.commands.length > MAX_COMMANDS || (this.totalBytes > MAX_TOTAL_BYTES && this.commands.length > 1)) {
      const dropped = this.commands.shift();
      if (dropped) this.totalBytes -= Buffer.byteLength(dropped.output);
    }
  }

  byOperationId(operationId: string): WindowCommand | undefined {
    return this.commands.find((c) => c.operationId === operationId);
  }

  /** The command of this window an audited command of `sandboxKey` logged at `loggedAt` (ms) is, if any. */
  match(sandboxKey: string, loggedAt: number, durationMs: number): WindowCommand | undefined {
    let best: { c: WindowCommand; distance: number } | undefined;
    for (const c of this.commands) {
      if (c.sandboxKey !== sandboxKey || c.endedAt === undefined) continue;
      const ranFrom = loggedAt - durationMs;
      if (ranFrom < c.startedAt - MATCH_SLACK_MS || loggedAt > c.endedAt + MATCH_SLACK_MS) continue;
      const distance = Math.abs(c.endedAt - loggedAt) + Math.abs(c.startedAt - ranFrom);
      if (!best || distance < best.distance) best = { c, distance };
    }
    return best?.c;
  }
}

/** The output document's text: what ran, where, its output and how it ended. */
export function commandOutputText(c: WindowCommand): string {
  const ending = c.ending === 'completed' ? `exit ${c.exitCode ?? '?'}` : (c.ending ?? 'still running');
  const output = c.output.replace(/\r\n/g, '\n');
  return (
    `$ ${c.command}\n# sandbox ${c.sandboxKey} · /${c.cwd} · ${c.from} · operation ${c.operationId} · ${new Date(c.startedAt).toISOString()}\n\n` +
    output +
    (output === '' || output.endsWith('\n') ? '' : '\n') +
    (c.truncated ? `[output cut at ${MAX_OUTPUT_BYTES / 1024} KiB]\n` : '') +
    `[${ending}]\n`
  );
}
