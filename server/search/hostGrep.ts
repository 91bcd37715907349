// A text search of a local sandbox's folder at the speed of GNU grep: JavaScript reading and
// matching 10,000 files costs 2-8× what `grep -rn` does (a file system round trip per call, and
// regular expressions over decoded text); handing grep lists of paths (xargs) is slower than its
// own walk. So two walks run side by side, both GNU fts walks that never follow a symbolic link
// met on the way (opened O_NOFOLLOW): `grep -r -l -F` (C locale) names the files that contain a
// literal every match must contain (requiredLiteral), and `find -printf` lists every regular file
// with its size, checked here with the in-process search's filter, size limit and byte budget.
// A file grep names is read only if the listing accepted it — through hostTree (O_NOFOLLOW, real
// path checked to be inside the workspace) — and matched by the same textMatcher, so results,
// ranges, previews and limits are those of the in-process search: grep only picks the files worth
// reading, and nothing it reads reaches the caller. The event loop never waits on the disk.
// Difference: `skippedBinary` counts the binary files that contain the literal (others are not read).
// Time to the first result: grep is started first (it is the slower walk; each spawn costs a few ms),
// the listing is handled in slices between the files grep names, and a file grep names before the
// listing reached it waits only until the listing passes that file (its size decides the byte
// budget), not for the whole listing; a path the filter rejects is dropped at once.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import path from 'node:path';
import type { TextSearchQuery } from '../../protocol/search';
import { hostTree } from './hostTree';
import { DEFAULT_EXCLUDED_FOLDERS, createSearchFilter, type SearchFilter } from './searchFilter';
import type { SearchRun } from './searchRun';
import { createTextMatcher, isBinary } from './textMatcher';

let probe: Promise<boolean> | undefined;

/** Whether grep and find here are GNU's (grep -r -l --null -F -i in the C locale, find -printf). */
export function gnuGrepAvailable(): Promise<boolean> {
  const version = (tool: string, name: RegExp): Promise<boolean> =>
    new Promise((resolve) => {
      execFile(tool, ['--version'], { timeout: 5000, env: { ...process.env, LC_ALL: 'C' } }, (err, stdout) => resolve(!err && name.test(stdout)));
    });
  probe ??= Promise.all([version('grep', /GNU grep/), version('find', /GNU findutils/)]).then((ok) => ok.every(Boolean));
  return probe;
}

export async function searchWithGrep(realRoot: string, folder: string, run: SearchRun, literal: string): Promise<void> {
  const query = run.query as TextSearchQuery;
  const filter = createSearchFilter(query);
  const matcher = createTextMatcher(query); // first: an invalid expression fails before any work
  const tree = hostTree(realRoot);
  const { signal } = run;
  const env = { ...process.env, LC_ALL: 'C' };
  const cwd = folder === '' ? realRoot : path.join(realRoot, folder);
  const pruned = query.useDefaultExcludes ? DEFAULT_EXCLUDED_FOLDERS : [];

  // Both in their own process group: a cancel or a bound ends them and every grep at once. grep first:
  // the first result waits on it, and find (a walk that reads no file, several times faster) soon
  // lists each file before grep names it.
  const grep = spawnLiteralGrep(cwd, env, pruned, query, literal);
  const find = spawnListing(cwd, env, pruned);
  const stopAll = (): void => {
    for (const child of [find, grep]) killGroup(child);
  };
  signal.addEventListener('abort', stopAll, { once: true });

  // The listing: each file checked as the in-process walk checks it.
  const listing = new Listing(folder, filter, query, run);
  const prefix = folder === '' ? '' : `${folder}/`;
  const accepted = listing.accepted;
  const listed = records(find, (record) => {
    if (signal.aborted || listing.budgetHit) return;
    const space = record.indexOf(' ');
    if (space > 0) listing.onFile(Number(record.slice(0, space)), prefix + record.slice(space + 1));
    if (listing.budgetHit) killGroup(find);
  }, LISTING_SLICE).finally(() => listing.end());

  // The files grep names, read and matched one after another, in the order named.
  let chain = Promise.resolve();
  const examine = async (rel: string): Promise<void> => {
    if (signal.aborted) return;
    // grep ahead of the listing (find's output comes in blocks): wait until the listing has passed this file.
    if (!accepted.has(rel) && listing.pathPasses(rel)) await listing.reached(rel);
    if (signal.aborted || !accepted.delete(rel)) return;
    const outcome = await tree.read(rel, query.maxFileBytes, signal);
    if (signal.aborted) return;
    if ('skipped' in outcome) {
      if (outcome.skipped === 'large') run.stats.skippedLarge++;
      return;
    }
    if (isBinary(outcome.contents)) {
      run.stats.skippedBinary++;
      return;
    }
    const found = matcher.search(rel, outcome.contents, run.remaining);
    run.addLines(found.lines, found.matchLines, found.more);
  };
  const named = records(grep, (name) => {
    const rel = prefix + (name.startsWith('./') ? name.slice(2) : name);
    chain = chain.then(() => examine(rel));
  });

  try {
    await Promise.all([listed, named]);
    await chain;
  } finally {
    signal.removeEventListener('abort', stopAll);
    stopAll();
  }
  // The files within the budget were all searched; the ones after it were not.
  if (listing.budgetHit) run.stop('bytes');
}

/** `find` listing every regular file below `cwd` with its size (`%s %P`, NUL-terminated), pruning the excluded folders. */
function spawnListing(cwd: string, env: NodeJS.ProcessEnv, pruned: readonly string[]): ChildProcess {
  return spawn(
    'find',
    [
      '.',
      ...(pruned.length > 0 ? ['-type', 'd', '(', ...pruned.flatMap((n, i) => [...(i > 0 ? ['-o'] : []), '-name', n]), ')', '-prune', '-o'] : []),
      '-type',
      'f',
      '-printf',
      '%s %P\\0',
    ],
    { cwd, env, stdio: ['ignore', 'pipe', 'ignore'], detached: true },
  );
}

/** `grep -r -l` naming the files below `cwd` that contain the literal. */
function spawnLiteralGrep(cwd: string, env: NodeJS.ProcessEnv, pruned: readonly string[], query: TextSearchQuery, literal: string): ChildProcess {
  return spawn(
    'grep',
    ['-r', '-l', '--null', '--line-buffered', '-F', ...(query.isCaseSensitive ? [] : ['-i']), ...pruned.map((n) => `--exclude-dir=${n}`), '-e', literal, '--', '.'],
    { cwd, env, stdio: ['ignore', 'pipe', 'ignore'], detached: true },
  );
}

/** The files of find's listing that the search may read: filters, the size limit and the byte budget, as the in-process walk applies them. */
export class Listing {
  readonly accepted = new Set<string>();
  budgetHit = false;
  private readonly folderOk: Map<string, boolean>;
  /** Files grep named before the listing reached them, and what to call when it does (or ends). */
  private readonly waiting = new Map<string, () => void>();
  /** Listed files left out for their size (grep may name them after the listing passed them). */
  private readonly tooLarge = new Set<string>();
  private ended = false;

  constructor(
    folder: string,
    private readonly filter: SearchFilter,
    private readonly query: TextSearchQuery,
    private readonly run: SearchRun,
  ) {
    this.folderOk = new Map([[folder, true]]);
  }

  private folderPasses(dir: string): boolean {
    let ok = this.folderOk.get(dir);
    if (ok === undefined) {
      const slash = dir.lastIndexOf('/');
      ok = this.folderPasses(slash < 0 ? '' : dir.slice(0, slash)) && this.filter.folder(dir);
      this.folderOk.set(dir, ok);
    }
    return ok;
  }

  /** Whether the filters let this path be searched (its size and the budget aside). */
  pathPasses(rel: string): boolean {
    const slash = rel.lastIndexOf('/');
    return this.folderPasses(slash < 0 ? '' : rel.slice(0, slash)) && this.filter.file(rel);
  }

  /** Settles once the listing has decided on `rel` (accepted it or not), or has ended without it. */
  reached(rel: string): Promise<void> {
    if (this.ended || this.tooLarge.has(rel)) return Promise.resolve();
    return new Promise((resolve) => this.waiting.set(rel, resolve));
  }

  /** The listing is over (complete, or cut by the budget or a cancel): nothing waits any longer. */
  end(): void {
    this.ended = true;
    for (const resolve of this.waiting.values()) resolve();
    this.waiting.clear();
  }

  onFile(size: number, rel: string): void {
    this.decide(size, rel);
    if (this.waiting.size > 0) {
      const resolve = this.waiting.get(rel);
      if (resolve !== undefined) {
        this.waiting.delete(rel);
        resolve();
      }
    }
  }

  private decide(size: number, rel: string): void {
    if (!this.pathPasses(rel)) return;
    const stats = this.run.stats;
    if (size > this.query.maxFileBytes) {
      stats.skippedLarge++;
      this.tooLarge.add(rel);
      return;
    }
    if (stats.bytesSearched + size > this.query.maxTotalBytes) {
      this.budgetHit = true;
      return;
    }
    stats.bytesSearched += size;
    stats.filesSearched++;
    this.accepted.add(rel);
  }
}

/** Records of the listing handled per turn of the event loop (the files grep names are not held up for long). */
const LISTING_SLICE = 256;
/** Unhandled listing bytes at which find is paused (it waits on its pipe) until they are handled. */
const LISTING_HIGH_WATER = 1024 * 1024;

/**
 * Calls `onRecord` for each NUL-terminated record on the child's stdout; settles when it has exited and
 * every record was handled. With `slice`, at most that many records are handled per turn of the event
 * loop (a long listing then never keeps the loop busy for more than a moment); without, each chunk at once.
 */
function records(child: ChildProcess, onRecord: (record: string) => void, slice = Number.POSITIVE_INFINITY): Promise<void> {
  const stdout = child.stdout;
  const queue: Buffer[] = [];
  let queued = 0;
  let head: Buffer = Buffer.alloc(0);
  let at = 0;
  let closed = false;
  let scheduled = false;
  let settle: (() => void) | undefined;
  const schedule = (): void => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(drain);
  };
  function drain(): void {
    scheduled = false;
    let handled = 0;
    while (handled < slice) {
      const nul = head.indexOf(0, at);
      if (nul >= 0) {
        onRecord(head.toString('utf8', at, nul));
        at = nul + 1;
        handled++;
        continue;
      }
      const next = queue.shift();
      if (next === undefined) break;
      queued -= next.length;
      head = at < head.length ? Buffer.concat([head.subarray(at), next]) : next;
      at = 0;
    }
    if (stdout?.isPaused() === true && queued < LISTING_HIGH_WATER) stdout.resume();
    if (handled >= slice) schedule(); // more may be there
    else if (closed) settle?.();
  }
  stdout?.on('data', (chunk: Buffer) => {
    queue.push(chunk);
    queued += chunk.length;
    if (slice === Number.POSITIVE_INFINITY) return drain();
    if (queued >= LISTING_HIGH_WATER) stdout.pause();
    schedule();
  });
  return new Promise((resolve, reject) => {
    settle = resolve;
    child.on('error', reject);
    // Exit codes are not results: find says 1 for an unreadable folder, grep 1 when it found nothing.
    child.on('close', () => {
      closed = true;
      if (slice === Number.POSITIVE_INFINITY) resolve();
      else schedule();
    });
  });
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
