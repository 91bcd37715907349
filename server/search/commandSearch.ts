// A search run as one command in the sandbox, for sandboxes whose files are not on this machine:
// `find` for names, GNU `grep -r` for text (it skips binaries with -I and never follows symbolic links
// below its start folder). The pattern and folder travel as arguments of `sh -c`, never inside the
// script. Output streams back over the session (era C stream or era D socket) and is parsed as it
// arrives; when a bound is reached or the caller cancels, the operation is cancelled, which ends
// the process group in the sandbox — no grep is left running. The command waits its turn in the
// sandbox's FIFO queue behind any running command.
import { GatewayError } from '../../protocol/kruntimes/gatewayErrors';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { SearchLine, SearchQuery } from '../../protocol/search';
import { DEFAULT_EXCLUDED_FOLDERS, createSearchFilter, fuzzyContains } from './searchFilter';
import type { SearchRun } from './searchRun';
import { compileQuery } from './textMatcher';
import { SandboxSessionsError } from '../../protocol/errors';

/** The command cannot run here (no shell, find or grep, or commands are refused): search another way. */
export class CommandSearchUnavailable extends SandboxSessionsError<'search_unavailable'> {
  override readonly name = 'CommandSearchUnavailable';
  readonly service = 'search';
  constructor(message: string) {
    super('search_unavailable', message);
  }
}

export interface SearchCommand {
  argv: string[];
}

/** Exit status of the command when the folder to search resolves outside the workspace (through a link). */
export const OUTSIDE_EXIT = 3;

/** Enters the folder (`$1`) only if it resolves inside the workspace (the command's start folder). */
const ENTER = `root=$(pwd -P) && cd -P -- "$1" && case "$(pwd -P)/" in "$root"/*) ;; *) exit ${OUTSIDE_EXIT} ;; esac && exec`;

/** The argv of the search command (exported for tests and the docs). */
export function searchCommand(query: SearchQuery, folder: string): SearchCommand {
  const dir = folder === '' ? '.' : folder;
  if (query.kind === 'files') {
    const prune = query.useDefaultExcludes ? `\\( ${DEFAULT_EXCLUDED_FOLDERS.map((n) => `-name '${n}'`).join(' -o ')} \\) -prune -o ` : '';
    return { argv: ['sh', '-c', `${ENTER} find . ${prune}-type f -print0`, 'sandbox-search', dir] };
  }
  const flags = [
    '-r',
    '-n',
    '-I',
    '-H',
    '-Z',
    '--color=never',
    query.isRegExp ? '-E' : '-F',
    ...(query.isCaseSensitive ? [] : ['-i']),
    ...(query.isWordMatch ? ['-w'] : []),
    ...(query.contextLines > 0 ? [`-C${query.contextLines}`] : []),
    ...(query.useDefaultExcludes ? DEFAULT_EXCLUDED_FOLDERS.map((n) => `--exclude-dir=${n}`) : []),
  ];
  return { argv: ['sh', '-c', `${ENTER} grep ${flags.join(' ')} -e "$2" -- .`, 'sandbox-search', dir, query.pattern] };
}

/**
 * Turns the command's output records into results: for files, `./path` (NUL-separated); for text, grep's
 * `./path\0<line>:<text>` (match) or `./path\0<line>-<text>` (context) lines, or `--` between groups. A file's lines
 * are sent together when the next file starts (one addLines per file), or on `flush`.
 */
class RecordReader {
  private readonly filter: ReturnType<typeof createSearchFilter>;
  private readonly prefix: string;
  private readonly js: RegExp | undefined;
  private pending: Buffer = Buffer.alloc(0);
  private fileLines: SearchLine[] = [];
  private fileMatches = 0;
  private readonly separator: number;

  constructor(
    private readonly run: SearchRun,
    folder: string,
  ) {
    this.filter = createSearchFilter(run.query);
    this.prefix = folder === '' ? '' : `${folder}/`;
    this.js = run.query.kind === 'text' ? compileQuery(run.query) : undefined;
    this.separator = run.query.kind === 'files' ? 0 : 0x0a;
  }

  private relative(p: string): string {
    return this.prefix + (p.startsWith('./') ? p.slice(2) : p);
  }

  /** A chunk of stdout: every whole record in it is read. */
  onStdout(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    let at = 0;
    for (let i = this.pending.indexOf(this.separator, at); i >= 0 && !this.run.signal.aborted; i = this.pending.indexOf(this.separator, at)) {
      this.onRecord(this.pending.subarray(at, i));
      at = i + 1;
    }
    this.pending = this.pending.subarray(at);
  }

  /** The end of the output: a last record without a separator, and the last file's lines. */
  end(): void {
    if (this.pending.length > 0 && !this.run.signal.aborted) this.onRecord(this.pending);
    this.flushFile();
  }

  private flushFile(): void {
    if (this.fileLines.length > 0) this.run.addLines(this.fileLines, this.fileMatches);
    this.fileLines = [];
    this.fileMatches = 0;
  }

  private onRecord(record: Buffer): void {
    const { run } = this;
    const query = run.query;
    if (query.kind === 'files') {
      const rel = this.relative(record.toString('utf8'));
      run.stats.filesSearched++;
      if (this.filter.file(rel) && fuzzyContains(rel, query.pattern)) run.addFile(rel);
      return;
    }
    const nul = record.indexOf(0);
    if (nul < 0) return;
    const rel = this.relative(record.subarray(0, nul).toString('utf8'));
    const rest = record.subarray(nul + 1).toString('utf8');
    const m = /^(\d+)([:-])(.*)$/s.exec(rest);
    if (!m || !this.filter.file(rel)) return;
    if (this.fileLines.length > 0 && this.fileLines[0]?.path !== rel) this.flushFile();
    const text = (m[3] as string).replace(/\r$/, '');
    const line = Number(m[1]);
    if (m[2] === '-') {
      this.fileLines.push({ path: rel, line, kind: 'context', text, textOffset: 0, ranges: [] });
      return;
    }
    if (this.fileMatches >= run.remaining) {
      // One match past the limit: what was found is reported and the search stops (limitHit).
      this.flushFile();
      run.stop('results');
      return;
    }
    this.fileLines.push({ path: rel, line, kind: 'match', text, textOffset: 0, ranges: this.matchRanges(text) });
    this.fileMatches++;
  }

  /** The match ranges in a matching line; grep's POSIX regular expressions and JavaScript's differ at the edges: then the whole line. */
  private matchRanges(text: string): { start: number; end: number }[] {
    const ranges: { start: number; end: number }[] = [];
    const js = this.js;
    if (js) {
      js.lastIndex = 0;
      for (let r = js.exec(text); r !== null; r = js.exec(text)) {
        if (r[0].length === 0) js.lastIndex++;
        else ranges.push({ start: r.index, end: r.index + r[0].length });
      }
    }
    return ranges.length > 0 ? ranges : [{ start: 0, end: text.length }];
  }
}

/** Runs the command, feeding stdout to `onStdout`; its exit code and the end of its stderr (`thrownOnCancel`: the stream failed because the search was cancelled). */
async function streamCommand(client: GatewayClient, argv: string[], run: SearchRun, onStdout: (chunk: Buffer) => void): Promise<{ exitCode: number | undefined; stderr: string; thrownOnCancel?: true }> {
  let stderr = '';
  let exitCode: number | undefined;
  try {
    const events = client.stream({ command: { argv, timeoutMillis: run.query.timeoutMs } }, { signal: run.signal });
    for await (const event of events) {
      if (event.type === 'output' && event.output.data) {
        const data = Buffer.from(event.output.data, 'base64');
        if (event.output.stream === 'stderr') stderr = (stderr + data.toString('utf8')).slice(-4096);
        else onStdout(data);
      } else if (event.type === 'completed') {
        const result = event.completed.command;
        exitCode = result?.exitCode;
        if (result?.stderr && stderr === '') stderr = Buffer.from(result.stderr, 'base64').toString('utf8').slice(-4096);
      } else if (event.type === 'failed') {
        throw new GatewayError(409, event.failed.message ?? `the search command failed (code ${event.failed.code})`);
      }
      if (run.signal.aborted) break; // leaving the loop cancels the operation in the sandbox
    }
  } catch (err) {
    if (run.signal.aborted) return { exitCode, stderr, thrownOnCancel: true };
    // Refused: the sandbox takes no commands now (Finalizing, draining), or this gateway runs none.
    if (err instanceof GatewayError && (err.status === 409 || err.status === 501 || err.status === 412)) {
      throw new CommandSearchUnavailable(err.message);
    }
    throw err;
  }
  return { exitCode, stderr };
}

export async function searchByCommand(client: GatewayClient, folder: string, run: SearchRun): Promise<void> {
  const { query } = run;
  const { argv } = searchCommand(query, folder);
  const reader = new RecordReader(run, folder);
  const { exitCode, stderr, thrownOnCancel } = await streamCommand(client, argv, run, (chunk) => reader.onStdout(chunk));
  if (thrownOnCancel) return;
  reader.end();
  if (run.signal.aborted) return;
  if (exitCode === OUTSIDE_EXIT && run.stats.filesSearched === 0 && run.stats.matches === 0) {
    throw new CommandSearchFailed(`the folder ${folder} leads outside the sandbox's workspace (a symbolic link); search its target instead`);
  }
  if (exitCode === 127 || exitCode === 126) throw new CommandSearchUnavailable(`the sandbox cannot run the search command: ${stderr.trim() || `exit ${exitCode}`}`);
  // grep: 1 = nothing found. 2 = an error, e.g. an invalid regular expression, or an unreadable file (results still valid).
  if (exitCode === 2 && query.kind === 'text' && run.stats.matches === 0 && stderr.trim() !== '') {
    throw new CommandSearchFailed(`grep in the sandbox: ${stderr.trim().split('\n').slice(-1)[0] ?? ''}`);
  }
}

/** The command ran and said the query is wrong (e.g. a regular expression grep cannot read). */
export class CommandSearchFailed extends SandboxSessionsError<'search_query'> {
  override readonly name = 'CommandSearchFailed';
  readonly service = 'search';
  constructor(message: string) {
    super('search_query', message);
  }
}
