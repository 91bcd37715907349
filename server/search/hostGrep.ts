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

  // Both in their own process group: a cancel or a bound ends them and every grep at once.
  const find = spawnListing(cwd, env, pruned);
  const grep = spawnLiteralGrep(cwd, env, pruned, query, literal);
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
  });

  // The files grep names, read and matched one after another, in the order named.
  let chain = Promise.resolve();
  const examine = async (rel: string): Promise<void> => {
    if (signal.aborted) return;
    if (!accepted.has(rel)) await listed; // grep ahead of the listing (rare): decide when it is complete
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
class Listing {
  readonly accepted = new Set<string>();
  budgetHit = false;
  private readonly folderOk: Map<string, boolean>;

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

  onFile(size: number, rel: string): void {
    const slash = rel.lastIndexOf('/');
    if (!this.folderPasses(slash < 0 ? '' : rel.slice(0, slash)) || !this.filter.file(rel)) return;
    const stats = this.run.stats;
    if (size > this.query.maxFileBytes) {
      stats.skippedLarge++;
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

/** Calls `onRecord` for each NUL-terminated record on the child's stdout; settles when it has exited. */
function records(child: ChildProcess, onRecord: (record: string) => void): Promise<void> {
  let pending: Buffer = Buffer.alloc(0);
  child.stdout?.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    let at = 0;
    for (let i = pending.indexOf(0); i >= 0; i = pending.indexOf(0, at)) {
      onRecord(pending.subarray(at, i).toString('utf8'));
      at = i + 1;
    }
    pending = pending.subarray(at);
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    // Exit codes are not results: find says 1 for an unreadable folder, xargs 123 when a grep found nothing.
    child.on('close', () => resolve());
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
