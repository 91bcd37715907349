// A search run as one command in the sandbox, for sandboxes whose files are not on this machine:
// `find` for names; for text, `find` lists the files with their sizes, `awk` passes on only those
// within the request's byte limits (a file larger than maxFileBytes is skipped and counted; the
// first file that would pass maxTotalBytes ends the list) and `grep` reads them through `xargs` —
// so grep never reads more than the budget, in the sandbox, whatever the companion does. GNU's
// find and grep name each file with a NUL (-printf, -Z) and skip binaries (-I); with BusyBox's
// (Alpine), which have neither, stat gives the sizes and the lines are told apart by the script
// (linesBatchScript) and the reader (a NUL in a line makes its file binary). Neither find nor grep
// follows a symbolic link below the start folder. awk reports what it passed on in one stderr line
// (`sandbox-search: files=… bytes=… large=… stopped=…`). The pattern, folder and limits travel as
// arguments of `sh -c`, never inside the script. Output streams
// back over the session (era C stream or era D socket) and is parsed as it arrives; when a bound is
// reached or the caller cancels, the operation is cancelled, which ends the process group in the
// sandbox — no grep is left running. The command waits its turn in the sandbox's FIFO queue behind
// any running command.
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

/** Enters the folder (`$1`) only if it resolves inside the workspace (the command's start folder); exits otherwise. */
const ENTER_SCRIPT = `root=$(pwd -P) && cd -P -- "$1" || exit 1\ncase "$(pwd -P)/" in "$root"/*) ;; *) exit ${OUTSIDE_EXIT} ;; esac`;

/** The argv of the search command (exported for tests and the docs). */
export function searchCommand(query: SearchQuery, folder: string): SearchCommand {
  const dir = folder === '' ? '.' : folder;
  if (query.kind === 'files') {
    return { argv: ['sh', '-c', `${ENTER_SCRIPT}\nexec find . ${prunes(query)}-type f -print0`, 'sandbox-search', dir] };
  }
  const matching = [query.isRegExp ? '-E' : '-F', ...(query.isCaseSensitive ? [] : ['-i']), ...(query.isWordMatch ? ['-w'] : [])].join(' ');
  const context = query.contextLines > 0 ? ` -C${query.contextLines}` : '';
  // GNU grep: -I skips binaries, -Z ends each name with a NUL, and each line leaves at once (not a pipe buffer
  // later): the first result comes as soon as grep finds it.
  const gnuGrep = `grep -n -I -H -Z --color=never --line-buffered ${matching}${context} -e "$2"`;
  const script = [
    // No find, awk, xargs or grep: 127, so the companion searches through the file API instead.
    `command -v find >/dev/null && command -v awk >/dev/null && command -v xargs >/dev/null && command -v grep >/dev/null || exit 127`,
    `if { grep -I -Z --line-buffered --color=never -e x </dev/null >/dev/null 2>&1; test $? -eq 1; } && find . -maxdepth 0 -printf '' >/dev/null 2>&1; then`,
    // An expression grep cannot read fails here, before any file is read (grep says 2 and why).
    `{ ${gnuGrep} </dev/null >/dev/null; test $? -ne 2; } || exit ${BAD_PATTERN_EXIT}`,
    `find . ${prunes(query)}-type f -printf '%s %p\\0' | awk -v max="$3" -v maxfile="$4" '${budgetAwk('nul')}' | xargs -0 -r -n ${GREP_BATCH} ${gnuGrep} --`,
    'else',
    // BusyBox (Alpine): find has no -printf, grep no -I or -Z, awk reads no NUL-ended records. stat gives the sizes,
    // a line per file (a name holding a newline is left out), tr ends awk's names with a NUL for xargs, and the
    // batch script ($5) names each file its lines come from where grep's own prefix could not be told apart.
    `command -v stat >/dev/null && command -v tr >/dev/null || exit 127`,
    // BusyBox's grep reads the expression with the first line (none: no error), so it is given one.
    `{ echo | grep ${matching} -e "$2" >/dev/null; test $? -ne 2; } || exit ${BAD_PATTERN_EXIT}`,
    `printf '\\0\\n'`,
    `find . ${prunes(query)}-type f ! -name '*\n*' -exec stat -c '%s %n' {} + | awk -v max="$3" -v maxfile="$4" '${budgetAwk('lines')}' | tr '\\n' '\\000' | xargs -0 -r -n ${GREP_BATCH} sh -c "$5" sandbox-search-batch "$2"`,
    'fi',
  ].join('\n');
  return {
    argv: ['sh', '-c', `${ENTER_SCRIPT}\n${script}`, 'sandbox-search', dir, query.pattern, String(query.maxTotalBytes), String(query.maxFileBytes), linesBatchScript(matching, context)],
  };
}

/**
 * One batch of files for a grep without -Z (BusyBox's), in `sh -c` with the pattern as $1. Grepped whole, a line is
 * `./name:12:text`, which only a name without a `:` splits right, and with context lines `./name-12-text` would not
 * split at all. So a batch whose names hold a `:` (rare), or with context lines asked for, has grep -l find the files
 * with a match and greps each of those alone: a line of a NUL and the name, then grep's own `12:text` / `12-text`.
 */
function linesBatchScript(matching: string, context: string): string {
  const eachAlone = `grep -l ${matching} -e "$p" -- "$@" | while IFS= read -r f; do printf '\\0%s\\n' "$f"; grep -n -h ${matching}${context} -e "$p" -- "$f"; done`;
  if (context !== '') return [`p=$1; shift`, eachAlone].join('\n');
  return [`p=$1; shift`, `case "$*" in`, `*:*) ${eachAlone} ;;`, `*) grep -n -H ${matching} -e "$p" -- "$@" ;;`, 'esac'].join('\n');
}

/** Exit status of the command when grep refuses the pattern. */
export const BAD_PATTERN_EXIT = 4;

/** Files per grep (xargs -n): small enough that the first results come early, large enough that forks do not cost. */
const GREP_BATCH = 256;

/**
 * Reads find's `<size> <path>` records (NUL-terminated, or a line each for an awk that reads no NUL) and writes the
 * paths grep may read, ended the same way: a file over `maxfile` is skipped (counted), the first one that would take
 * the total over `max` ends the list. At the end (also after that), one line on stderr says what was passed on.
 */
function budgetAwk(records: 'nul' | 'lines'): string {
  return [
    records === 'nul' ? 'BEGIN { RS = "\\0"; ORS = "\\0"; max += 0; maxfile += 0 }' : 'BEGIN { max += 0; maxfile += 0 }',
    '{ n = index($0, " "); s = substr($0, 1, n - 1) + 0',
    '  if (s > maxfile) { large++; next }',
    '  if (bytes + s > max) { hit = 1; exit }',
    '  bytes += s; files++; print substr($0, n + 1) }',
    'END { printf "\\nsandbox-search: files=%d bytes=%.0f large=%d stopped=%s\\n", files, bytes, large, (hit ? "bytes" : "") > "/dev/stderr" }',
  ].join('\n');
}

function prunes(query: SearchQuery): string {
  return query.useDefaultExcludes ? `\\( ${DEFAULT_EXCLUDED_FOLDERS.map((n) => `-name '${n}'`).join(' -o ')} \\) -prune -o ` : '';
}

/** What awk passed on to grep (its stderr line). */
export interface CommandBudget {
  files: number;
  bytes: number;
  large: number;
  stopped: boolean;
}

const BUDGET_LINE = /^sandbox-search: files=(\d+) bytes=(\d+) large=(\d+) stopped=(bytes)?$/;

/** Splits the command's stderr into awk's budget line and the rest (the last 4 KiB of which is kept for messages). */
class StderrReader {
  budget: CommandBudget | undefined;
  private partial = '';
  private tail = '';

  onChunk(text: string): void {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop() ?? '';
    for (const line of lines) this.onLine(line);
  }

  end(): void {
    if (this.partial !== '') this.onLine(this.partial);
    this.partial = '';
  }

  get text(): string {
    return this.tail;
  }

  private onLine(line: string): void {
    const m = BUDGET_LINE.exec(line);
    if (m) {
      this.budget = { files: Number(m[1]), bytes: Number(m[2]), large: Number(m[3]), stopped: m[4] === 'bytes' };
      return;
    }
    if (line !== '') this.tail = `${this.tail}${line}\n`.slice(-4096);
  }
}

const DOT = 0x2e;

/**
 * Turns the command's output records into results: for files, `./path` (NUL-separated); for text, GNU grep's
 * `./path\0<line>:<text>` (match) or `./path\0<line>-<text>` (context) lines, or `--` between groups. After a line
 * of a lone NUL, the lines are a grep's without -Z (linesBatchScript): `\0./path` names the file the next
 * `<line>:<text>` / `<line>-<text>` lines come from, `./path:<line>:<text>` is a match in a file whose name holds no
 * `:`, and a file with a NUL in a line is binary (that grep has no -I): its lines are dropped. A file's lines are sent
 * together when the next file starts (one addLines per file), or on `flush`.
 */
class RecordReader {
  private readonly filter: ReturnType<typeof createSearchFilter>;
  private readonly prefix: string;
  private readonly js: RegExp | undefined;
  private pending: Buffer = Buffer.alloc(0);
  private fileLines: SearchLine[] = [];
  private fileMatches = 0;
  private readonly separator: number;
  /** Lines of a grep without -Z follow (the command said so with a lone NUL). */
  private nameless = false;
  /** The file the nameless `<line>:<text>` lines are from. */
  private named: string | undefined;
  /** The last file found binary in nameless mode: its further lines are dropped. */
  private binary: string | undefined;

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
    for (let i = this.recordEnd(at); i >= 0 && !this.run.signal.aborted; i = this.recordEnd(at)) {
      this.onRecord(this.pending.subarray(at, i));
      at = i + 1;
    }
    this.pending = this.pending.subarray(at);
  }

  /**
   * Where the record at `at` ends (-1: not here yet). GNU grep's `./path\0…` line ends at the first newline after
   * the NUL, as the name may hold newlines (a line of text cannot); its `--` between groups, and every line of a
   * grep without -Z, at the first newline.
   */
  private recordEnd(at: number): number {
    const pending = this.pending;
    if (this.separator === 0 || this.nameless || pending[at] !== DOT) return pending.indexOf(this.separator, at);
    const nul = pending.indexOf(0, at);
    return nul < 0 ? -1 : pending.indexOf(0x0a, nul);
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
    if (this.nameless || record[0] === 0) {
      this.onNamelessRecord(record);
      return;
    }
    const nul = record.indexOf(0);
    if (nul < 0) return;
    const m = /^(\d+)([:-])(.*)$/s.exec(record.subarray(nul + 1).toString('utf8'));
    if (m) this.onLine(this.relative(record.subarray(0, nul).toString('utf8')), m);
  }

  /** A record of a grep without -Z (see the class comment). */
  private onNamelessRecord(record: Buffer): void {
    if (record[0] === 0) {
      this.nameless = true;
      this.named = record.length > 1 ? this.relative(record.subarray(1).toString('utf8')) : undefined;
      return;
    }
    const text = record.toString('utf8');
    const own = /^(\d+)([:-])(.*)$/s.exec(text);
    if (own) {
      if (this.named !== undefined) this.onLine(this.named, own, record.includes(0));
      return;
    }
    const prefixed = /^([^:]*):(\d+)(:)(.*)$/s.exec(text);
    if (prefixed) this.onLine(this.relative(prefixed[1] as string), prefixed.slice(1), record.includes(0));
  }

  /** One line of a file: `m` is [, line number, `:` (match) or `-` (context), text]. */
  private onLine(rel: string, m: ArrayLike<string | undefined>, binary = false): void {
    const { run } = this;
    if (!this.filter.file(rel) || rel === this.binary) return;
    if (this.fileLines.length > 0 && this.fileLines[0]?.path !== rel) this.flushFile();
    if (binary) {
      // As GNU grep's -I would have skipped it: none of its lines, and none found later.
      this.binary = rel;
      this.fileLines = [];
      this.fileMatches = 0;
      run.stats.skippedBinary++;
      return;
    }
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

/** Runs the command, feeding stdout to `onStdout` and stderr to `stderr`; its exit code (`thrownOnCancel`: the stream failed because the search was cancelled). */
async function streamCommand(client: GatewayClient, argv: string[], run: SearchRun, onStdout: (chunk: Buffer) => void, stderr: StderrReader): Promise<{ exitCode: number | undefined; thrownOnCancel?: true }> {
  let exitCode: number | undefined;
  let streamedStderr = false;
  try {
    const events = client.stream({ command: { argv, timeoutMillis: run.query.timeoutMs } }, { signal: run.signal });
    for await (const event of events) {
      if (event.type === 'output' && event.output.data) {
        const data = Buffer.from(event.output.data, 'base64');
        if (event.output.stream === 'stderr') {
          streamedStderr = true;
          stderr.onChunk(data.toString('utf8'));
        } else onStdout(data);
      } else if (event.type === 'completed') {
        const result = event.completed.command;
        exitCode = result?.exitCode;
        if (result?.stderr && !streamedStderr) stderr.onChunk(Buffer.from(result.stderr, 'base64').toString('utf8'));
      } else if (event.type === 'failed') {
        throw new GatewayError(409, event.failed.message ?? `the search command failed (code ${event.failed.code})`);
      }
      if (run.signal.aborted) break; // leaving the loop cancels the operation in the sandbox
    }
  } catch (err) {
    if (run.signal.aborted) return { exitCode, thrownOnCancel: true };
    // Refused: the sandbox takes no commands now (Finalizing, draining), or this gateway runs none.
    if (err instanceof GatewayError && (err.status === 409 || err.status === 501 || err.status === 412)) {
      throw new CommandSearchUnavailable(err.message);
    }
    throw err;
  }
  stderr.end();
  return { exitCode };
}

export async function searchByCommand(client: GatewayClient, folder: string, run: SearchRun): Promise<void> {
  const { query } = run;
  const { argv } = searchCommand(query, folder);
  const reader = new RecordReader(run, folder);
  const stderrReader = new StderrReader();
  const { exitCode, thrownOnCancel } = await streamCommand(client, argv, run, (chunk) => reader.onStdout(chunk), stderrReader);
  if (thrownOnCancel) return;
  reader.end();
  const stderr = stderrReader.text.trim();
  const budget = stderrReader.budget;
  if (budget) {
    // What grep was given to read, in the sandbox (every file passed on counts in full).
    run.stats.filesSearched = budget.files;
    run.stats.bytesSearched = budget.bytes;
    run.stats.skippedLarge = budget.large;
  }
  if (run.signal.aborted) return;
  if (exitCode === OUTSIDE_EXIT && run.stats.filesSearched === 0 && run.stats.matches === 0) {
    throw new CommandSearchFailed(`the folder ${folder} leads outside the sandbox's workspace (a symbolic link); search its target instead`);
  }
  if (exitCode === 127 || exitCode === 126) throw new CommandSearchUnavailable(`the sandbox cannot run the search command: ${stderr || `exit ${exitCode}`}`);
  if (exitCode === BAD_PATTERN_EXIT && query.kind === 'text' && run.stats.matches === 0) {
    throw new CommandSearchFailed(`grep in the sandbox: ${stderr.split('\n').slice(-1)[0] ?? ''}`);
  }
  if (query.kind === 'text' && budget === undefined && run.stats.matches === 0 && exitCode !== 0) {
    // The list never reached awk's end (e.g. awk missing mid-way): nothing says the files were searched.
    throw new CommandSearchUnavailable(`the search command in the sandbox ended without searching (exit ${exitCode ?? 'unknown'}): ${stderr}`);
  }
  // The budget ended the list: the files within it were all searched, the ones after it were not.
  if (budget?.stopped) run.stop('bytes');
}

/** The command ran and said the query is wrong (e.g. a regular expression grep cannot read). */
export class CommandSearchFailed extends SandboxSessionsError<'search_query'> {
  override readonly name = 'CommandSearchFailed';
  readonly service = 'search';
  constructor(message: string) {
    super('search_query', message);
  }
}
