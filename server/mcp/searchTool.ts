// `sandbox_search`: an agent finds files by name or text in a sandbox it may use, through the same
// search service as the companion's `sandboxes/search` (in place for a local sandbox's directory, a
// find/grep command or the file API elsewhere). Read-only, and bounded for an agent's context: at
// most MAX_RESULTS results, short context, and an answer of at most ANSWER_MAX_CHARS of text, with
// `limitHit`/`truncated` saying that there is more (narrow the query, or page with `folder`/globs).
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { type SearchLine, type SearchQuery, type SearchResult, SearchLimits, TextSearchQuerySchema } from '../../protocol/search';
import { SandboxSearchService } from '../search/searchService';
import { json, type McpToolContext } from './toolContext';
import { McpToolError } from './toolErrors';
import { sandboxArg } from './tools';

/** Results (matching lines, or files) one call returns at most. */
export const MAX_RESULTS = 500;
const DEFAULT_RESULTS = 100;
/** Context lines around a match at most (each costs a line of the answer). */
const MAX_CONTEXT_LINES = 3;
const DEFAULT_TIMEOUT_MS = 30_000;
/** The answer's text (paths and previews) at most; lines past it are left out and `truncated` is set. */
export const ANSWER_MAX_CHARS = 256 * 1024;

const text = TextSearchQuerySchema.shape;

export function registerSearchTool(server: McpServer, context: McpToolContext): void {
  const search = new SandboxSearchService(context.providers);
  server.registerTool(
    'sandbox_search',
    {
      title: 'Search a sandbox',
      description:
        'Finds text in the workspace files of a sandbox (kind "text": literal or regular expression, case, whole word, globs, ' +
        'context lines) or files by name (kind "files": paths containing the pattern\'s characters in order). Skips binary and ' +
        'large files and, by default, node_modules, .git, caches and logs. Bounded: at most maxResults results ' +
        `(≤ ${MAX_RESULTS}) and ${ANSWER_MAX_CHARS / 1024} KiB of answer; limitHit or truncated say there is more — narrow the ` +
        'pattern, folder or includes.',
      inputSchema: {
        sandbox: sandboxArg,
        kind: z.enum(['text', 'files']).default('text').describe('"text": lines of files that match; "files": workspace paths by name'),
        pattern: z
          .string()
          .max(4096)
          .default('')
          .describe('text: what to find (required); files: characters the path contains in order, case-insensitively ("" lists files)'),
        isRegExp: text.isRegExp.describe('text: the pattern is a regular expression (JavaScript syntax)'),
        isCaseSensitive: text.isCaseSensitive.describe('text: match case'),
        isWordMatch: text.isWordMatch.describe('text: match whole words only'),
        folder: text.folder.describe('A workspace-relative folder to search in ("" for the whole workspace)'),
        includes: text.includes.describe('Workspace-relative globs a file must match (e.g. "src/**/*.ts")'),
        excludes: text.excludes.describe('Workspace-relative globs of files to skip'),
        contextLines: z.number().int().min(0).max(MAX_CONTEXT_LINES).default(0).describe(`text: lines of context around each match (at most ${MAX_CONTEXT_LINES})`),
        maxResults: z.number().int().min(1).max(MAX_RESULTS).default(DEFAULT_RESULTS).describe(`Stop after this many matching lines or files (at most ${MAX_RESULTS})`),
        timeoutMs: z
          .number()
          .int()
          .min(100)
          .max(SearchLimits.maxTimeoutMs)
          .default(DEFAULT_TIMEOUT_MS)
          .describe(`Stop searching after this many ms (default ${DEFAULT_TIMEOUT_MS})`),
      },
      annotations: { title: 'Search a sandbox', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    context.tool('sandbox_search', async (args, extra) => {
      const { ref } = await context.resolve(args.sandbox);
      const result = await search.search(ref, queryOf(args), { signal: extra.signal });
      const { files, lines, truncated } = fitAnswer(result);
      return json({
        sandbox: args.sandbox,
        kind: args.kind,
        ...(args.kind === 'files' ? { files } : { lines }),
        limitHit: result.limitHit,
        ...(result.stopped ? { stopped: result.stopped } : {}),
        truncated,
        stats: { filesMatched: result.stats.filesMatched, matches: result.stats.matches, filesSearched: result.stats.filesSearched },
      });
    }),
  );
}

interface SearchArgs {
  kind: 'text' | 'files';
  pattern: string;
  isRegExp: boolean;
  isCaseSensitive: boolean;
  isWordMatch: boolean;
  folder: string;
  includes: string[];
  excludes: string[];
  contextLines: number;
  maxResults: number;
  timeoutMs: number;
}

/** The search service's query for the tool's arguments (a text search needs a pattern). */
function queryOf(args: SearchArgs): SearchQuery {
  const common = {
    folder: args.folder,
    includes: args.includes,
    excludes: args.excludes,
    useDefaultExcludes: true,
    maxResults: args.maxResults,
    timeoutMs: args.timeoutMs,
  };
  if (args.kind === 'files') return { kind: 'files', ...common, pattern: args.pattern };
  if (args.pattern === '') throw new McpToolError('invalid_argument', 'a text search needs a pattern (or kind "files" to find files by name)');
  return {
    kind: 'text',
    ...common,
    pattern: args.pattern,
    isRegExp: args.isRegExp,
    isCaseSensitive: args.isCaseSensitive,
    isWordMatch: args.isWordMatch,
    contextLines: args.contextLines,
    maxFileBytes: SearchLimits.defaultMaxFileBytes,
    maxTotalBytes: SearchLimits.defaultMaxTotalBytes,
  };
}

/** The files and lines that fit in ANSWER_MAX_CHARS, in order; `truncated` when some were left out. */
function fitAnswer(result: SearchResult): { files: string[]; lines: ReturnType<typeof lineOf>[]; truncated: boolean } {
  let budget = ANSWER_MAX_CHARS;
  let truncated = false;
  const files: string[] = [];
  for (const f of result.files) {
    if (budget - f.length < 0) {
      truncated = true;
      break;
    }
    budget -= f.length;
    files.push(f);
  }
  const lines: ReturnType<typeof lineOf>[] = [];
  for (const l of result.lines) {
    const cost = l.path.length + l.text.length + 16;
    if (budget - cost < 0) {
      truncated = true;
      break;
    }
    budget -= cost;
    lines.push(lineOf(l));
  }
  return { files, lines, truncated };
}

/** A line as the agent reads it: 1-based line, the match columns (1-based, end exclusive) in the file's line. */
function lineOf(l: SearchLine) {
  return {
    path: l.path,
    line: l.line,
    kind: l.kind,
    text: l.text,
    ...(l.kind === 'match' ? { columns: l.ranges.map((r) => [r.start + l.textOffset + 1, r.end + l.textOffset + 1]) } : {}),
  };
}
