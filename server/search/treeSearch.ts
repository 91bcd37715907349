// A search that walks a sandbox's tree itself, over any TreeSource (the sandbox's directory on this
// machine, or the gateway's file API): folders are listed and pruned by the filter, file names are
// matched as they are seen, and for a text search each file is read (bounded) and matched, several
// at a time. Only names a listing returned are ever joined into a path, and only entries the source
// calls files or folders are visited: a symbolic link is neither, so it is never followed.
import type { SearchQuery } from '../../protocol/search';
import { createSearchFilter, fuzzyContains } from './searchFilter';
import type { SearchRun } from './searchRun';
import { createTextMatcher, isBinary } from './textMatcher';

export interface TreeEntry {
  name: string;
  kind: 'file' | 'directory' | 'other';
  /** When the listing knows it. */
  size?: number | undefined;
}

export type ReadOutcome = { contents: Buffer } | { skipped: 'large' | 'gone' | 'not-a-file' };

export interface TreeSource {
  /** Entries of a workspace-relative folder ('' = the root). */
  list(relPath: string, signal: AbortSignal): Promise<TreeEntry[]>;
  /** A file's bytes, unless it is larger than `maxBytes` (or vanished, or is not a regular file). */
  read(relPath: string, maxBytes: number, signal: AbortSignal): Promise<ReadOutcome>;
}

export interface TreeSearchOptions {
  /** Folders listed / files read at the same time. */
  concurrency: number;
}

type Work = { dir: string } | { file: string; size: number | undefined };

export async function searchTree(source: TreeSource, folder: string, run: SearchRun, options: TreeSearchOptions): Promise<void> {
  const query: SearchQuery = run.query;
  const filter = createSearchFilter(query);
  const matcher = query.kind === 'text' ? createTextMatcher(query) : undefined;
  const queue: Work[] = [{ dir: folder }];
  let active = 0;
  let failure: unknown;
  const { signal } = run;

  const visit = async (work: Work): Promise<void> => {
    if ('dir' in work) {
      const entries = await source.list(work.dir, signal);
      const files: Work[] = [];
      const dirs: Work[] = [];
      for (const entry of entries) {
        const rel = work.dir === '' ? entry.name : `${work.dir}/${entry.name}`;
        if (entry.kind === 'directory') {
          if (filter.folder(rel)) dirs.push({ dir: rel });
        } else if (entry.kind === 'file' && filter.file(rel)) {
          if (matcher === undefined) {
            run.stats.filesSearched++;
            if (query.kind === 'files' && fuzzyContains(rel, query.pattern)) run.addFile(rel);
          } else {
            files.push({ file: rel, size: entry.size });
          }
        }
      }
      // Files of this folder first, then its folders (depth first: results arrive while the walk goes on).
      queue.push(...dirs.reverse(), ...files.reverse());
      return;
    }
    if (matcher === undefined || query.kind !== 'text') return;
    if (work.size !== undefined && work.size > query.maxFileBytes) {
      run.stats.skippedLarge++;
      return;
    }
    const outcome = await source.read(work.file, query.maxFileBytes, signal);
    if ('skipped' in outcome) {
      if (outcome.skipped === 'large') run.stats.skippedLarge++;
      return;
    }
    const { contents } = outcome;
    if (!run.takeBytes(contents.length)) return;
    run.stats.filesSearched++;
    if (isBinary(contents)) {
      run.stats.skippedBinary++;
      return;
    }
    const found = matcher.search(work.file, contents, run.remaining);
    run.addLines(found.lines, found.matchLines, found.more);
  };

  await new Promise<void>((resolve) => {
    const pump = (): void => {
      while (!signal.aborted && failure === undefined && active < options.concurrency && queue.length > 0) {
        const work = queue.pop() as Work;
        active++;
        visit(work)
          .catch((err: unknown) => {
            if (!signal.aborted && !isVanished(err)) failure ??= err;
          })
          .finally(() => {
            active--;
            pump();
          });
      }
      if (active === 0 && (queue.length === 0 || signal.aborted || failure !== undefined)) resolve();
    };
    pump();
  });
  if (failure !== undefined) throw failure;
}

/** A file or folder that went away while the search ran is not an error. */
function isVanished(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
