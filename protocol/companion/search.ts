// Finding files and text in a sandbox (`sandboxes/search`): one feature of the method table in index.ts;
// the query and result schemas are in protocol/search.ts.
import { SandboxSearchParamsSchema, SearchResultSchema } from '../search';
import { defineMethod, withProgressToken } from './contract';

export const searchMethods = {
  'sandboxes/search': defineMethod('sandboxes/search', {
    description:
      'Finds files by name (`kind: "files"`: workspace-relative paths, optionally filtered by a fuzzy `pattern`, for the ' +
      "editor's own ranking) or text in files (`kind: \"text\"`: literal or regular expression, case, whole word, context " +
      'lines) in a sandbox. Skips binary files, files over `maxFileBytes` and, unless `useDefaultExcludes` is false, ' +
      '`node_modules`, `.git`, caches and logs; `includes`/`excludes` are workspace-relative globs. Never leaves the ' +
      'workspace (symbolic links are not followed). Bounded by `maxResults`, `maxTotalBytes` and `timeoutMs` (`stopped` ' +
      'says which one ended it). With a progress token, results stream as `$/progress` values whose `partial` holds ' +
      '`{files}` or `{lines}`, and the result holds only the rest; `$/cancelRequest` stops the search where it runs (a ' +
      "local sandbox's directory is searched in the companion; a kruntimes sandbox runs `find`/`grep` in the sandbox, " +
      'which waits its turn in the FIFO queue, and its cancel ends that command; a sandbox that takes no commands — ' +
      'Finalizing — is searched through the file API).',
    params: withProgressToken(SandboxSearchParamsSchema),
    result: SearchResultSchema,
    progress: true,
    example: {
      params: {
        ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' },
        query: { kind: 'text', pattern: 'TODO', isWordMatch: true, includes: ['src/**/*.ts'], contextLines: 1 },
      },
      result: {
        strategy: 'host',
        files: [],
        lines: [
          { path: 'src/main.ts', line: 11, kind: 'context', text: 'function main() {', textOffset: 0, ranges: [] },
          { path: 'src/main.ts', line: 12, kind: 'match', text: '  // TODO: parse flags', textOffset: 0, ranges: [{ start: 5, end: 9 }] },
        ],
        limitHit: false,
        stats: { filesMatched: 1, matches: 1, filesSearched: 40, bytesSearched: 81234, skippedBinary: 2, skippedLarge: 0, durationMs: 12 },
      },
    },
  }),
} as const;
