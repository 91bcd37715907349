// Search inside a sandbox, as any editor asks for it over JSON-RPC (`sandboxes/search`): a file-name
// search (a list of workspace-relative paths for the editor's own fuzzy ranking) or a text search
// (literal or regular expression, case, whole word, globs, context lines), bounded in results, bytes
// and time. Results stream as `$/progress` batches (`partial`, parsed with SearchPartialSchema);
// the response carries what did not stream and why the search stopped.
import { z } from 'zod';
import { SandboxRefSchema } from './sandboxes';

/** Hard ceilings a caller cannot raise: one search never reads more than this from a sandbox. */
export const SearchLimits = {
  maxResults: 20_000,
  defaultMaxResults: 2_000,
  maxFileBytes: 50 * 1024 * 1024,
  defaultMaxFileBytes: 5 * 1024 * 1024,
  maxTotalBytes: 2 * 1024 * 1024 * 1024,
  defaultMaxTotalBytes: 512 * 1024 * 1024,
  maxTimeoutMs: 5 * 60_000,
  defaultTimeoutMs: 30_000,
  maxContextLines: 10,
  /** Characters of one preview line; longer lines are cut around the first match. */
  previewChars: 500,
} as const;

/** A workspace-relative glob (`**`, `*`, `?`, `{a,b}`, `[a-z]`); never absolute, never `..`. */
export const SearchGlobSchema = z
  .string()
  .min(1)
  .max(1024)
  .refine((g) => !g.startsWith('/') && !/^[A-Za-z]:[\\/]/.test(g), { message: 'a search glob is relative to the sandbox folder, not absolute' })
  .refine((g) => !g.split(/[\\/]/).includes('..'), { message: 'a search glob may not leave the sandbox folder (`..`)' });

const CommonFields = {
  /** A folder of the sandbox to search in ('' = the whole workspace), workspace-relative. */
  folder: z.string().max(4096).default(''),
  includes: z.array(SearchGlobSchema).max(64).default([]),
  excludes: z.array(SearchGlobSchema).max(256).default([]),
  /** Skip `node_modules`, `.git`, caches, logs and runtime scratch (the workspace snapshot policy). */
  useDefaultExcludes: z.boolean().default(true),
  maxResults: z.number().int().min(1).max(SearchLimits.maxResults).default(SearchLimits.defaultMaxResults),
  timeoutMs: z.number().int().min(100).max(SearchLimits.maxTimeoutMs).default(SearchLimits.defaultTimeoutMs),
};

export const FileSearchQuerySchema = z.object({
  kind: z.literal('files'),
  ...CommonFields,
  /**
   * Optional filter: paths that contain these characters in order, case-insensitively (a fuzzy
   * subsequence, like Quick Open). Empty: every file (up to `maxResults`).
   */
  pattern: z.string().max(1024).default(''),
});

export const TextSearchQuerySchema = z.object({
  kind: z.literal('text'),
  ...CommonFields,
  pattern: z.string().min(1).max(4096),
  isRegExp: z.boolean().default(false),
  isCaseSensitive: z.boolean().default(false),
  isWordMatch: z.boolean().default(false),
  contextLines: z.number().int().min(0).max(SearchLimits.maxContextLines).default(0),
  /** Files larger than this are skipped (and counted). */
  maxFileBytes: z.number().int().min(1).max(SearchLimits.maxFileBytes).default(SearchLimits.defaultMaxFileBytes),
  /** Bytes read in all before the search stops with `stopped: "bytes"`. */
  maxTotalBytes: z.number().int().min(1).max(SearchLimits.maxTotalBytes).default(SearchLimits.defaultMaxTotalBytes),
});

export const SearchQuerySchema = z.discriminatedUnion('kind', [FileSearchQuerySchema, TextSearchQuerySchema]);
export type SearchQuery = z.infer<typeof SearchQuerySchema>;
export type FileSearchQuery = z.infer<typeof FileSearchQuerySchema>;
export type TextSearchQuery = z.infer<typeof TextSearchQuerySchema>;
export type SearchQueryInput = z.input<typeof SearchQuerySchema>;

/** `sandboxes/search` params (besides the progress token). */
export const SandboxSearchParamsSchema = z.object({ ref: SandboxRefSchema, query: SearchQuerySchema });

/** One range of a match in a line, in UTF-16 code units of `text` (as editors count columns). */
export const SearchRangeSchema = z.object({ start: z.number().int().min(0), end: z.number().int().min(0) });

/**
 * One line of a text search result: a `match` line (with its ranges) or a `context` line around one.
 * `line` is 1-based. `text` is the line (cut to SearchLimits.previewChars; `textOffset` says where
 * the cut began, so `start`/`end` + `textOffset` are columns in the file's line).
 */
export const SearchLineSchema = z.object({
  path: z.string(),
  line: z.number().int().min(1),
  kind: z.enum(['match', 'context']),
  text: z.string(),
  textOffset: z.number().int().min(0).default(0),
  ranges: z.array(SearchRangeSchema).default([]),
});
export type SearchLine = z.infer<typeof SearchLineSchema>;

/** One streamed batch (`$/progress` value `partial`). */
export const SearchPartialSchema = z.object({
  files: z.array(z.string()).optional(),
  lines: z.array(SearchLineSchema).optional(),
});
export type SearchPartial = z.infer<typeof SearchPartialSchema>;

/** How the search ran: in the companion over the sandbox's directory, a command in the sandbox, or the file API. */
export const SearchStrategySchema = z.enum(['host', 'command', 'files-api']);
export type SearchStrategy = z.infer<typeof SearchStrategySchema>;

export const SearchResultSchema = z.object({
  strategy: SearchStrategySchema,
  /** Results not streamed (all of them when the caller gave no progress token). */
  files: z.array(z.string()).default([]),
  lines: z.array(SearchLineSchema).default([]),
  /** Why it stopped early, if it did: a limit (results, bytes, time). `limitHit` is true for any of them. */
  stopped: z.enum(['results', 'bytes', 'time']).optional(),
  limitHit: z.boolean(),
  stats: z.object({
    filesMatched: z.number().int().min(0),
    matches: z.number().int().min(0),
    filesSearched: z.number().int().min(0),
    bytesSearched: z.number().int().min(0),
    skippedBinary: z.number().int().min(0),
    skippedLarge: z.number().int().min(0),
    durationMs: z.number().min(0),
  }),
});
export type SearchResult = z.infer<typeof SearchResultSchema>;
