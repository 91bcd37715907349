// Finds a text query in one file's bytes: the query as a JavaScript regular expression (a literal
// escaped; case; whole word as "no letter, digit or _ on either side"), binary files recognised by a
// NUL byte near the start (as grep -I and git do), and the matching lines with their ranges and the
// context lines around them. The file is scanned as a whole (not line by line) and a case-sensitive
// literal is first looked for in the raw bytes, so files without a hit are never decoded.
import { SearchLimits, type SearchLine, type TextSearchQuery } from '../../protocol/search';
import { SandboxSessionsError } from '../../protocol/errors';

export class SearchQueryError extends SandboxSessionsError<'search_query'> {
  override readonly name = 'SearchQueryError';
  readonly service = 'search';
  constructor(message: string) {
    super('search_query', message);
  }
}

/** Bytes looked at for a NUL to call a file binary. */
const BINARY_SNIFF_BYTES = 8192;

export function isBinary(contents: Buffer): boolean {
  return contents.subarray(0, BINARY_SNIFF_BYTES).includes(0);
}

export interface TextMatcher {
  /**
   * Matches in one file, or [] (in file order; context lines included, each line once), at most
   * `maxMatchLines` match lines; `more` says a further match line was there (the result limit is passed).
   */
  search(relPath: string, contents: Buffer, maxMatchLines: number): { lines: SearchLine[]; matchLines: number; more: boolean };
}

type Query = Pick<TextSearchQuery, 'pattern' | 'isRegExp' | 'isCaseSensitive' | 'isWordMatch' | 'contextLines'>;

export function compileQuery(query: Query): RegExp {
  const body = query.isRegExp ? query.pattern : query.pattern.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const source = query.isWordMatch ? `(?<![A-Za-z0-9_])(?:${body})(?![A-Za-z0-9_])` : body;
  try {
    return new RegExp(source, query.isCaseSensitive ? 'g' : 'gi');
  } catch (err) {
    throw new SearchQueryError(`the search pattern is not a valid regular expression: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export function createTextMatcher(query: Query): TextMatcher {
  const re = compileQuery(query);
  // A case-sensitive literal can be found in the raw UTF-8 bytes before anything is decoded.
  const needle = !query.isRegExp && query.isCaseSensitive ? Buffer.from(query.pattern, 'utf8') : undefined;
  const context = query.contextLines;
  return {
    search(relPath, contents, maxMatchLines) {
      if (needle !== undefined && contents.indexOf(needle) < 0) return { lines: [], matchLines: 0, more: false };
      const text = contents.toString('utf8');
      const { found, more } = findMatchLines(re, text, maxMatchLines);
      if (found.length === 0) return { lines: [], matchLines: 0, more };
      return { lines: withContext(relPath, text, found, context), matchLines: found.length, more };
    },
  };
}

/** A line with matches: its number, its offsets in the text, and the match ranges within it. */
interface FoundLine {
  lineNo: number;
  start: number;
  end: number;
  ranges: { start: number; end: number }[];
}

/** The lines of `text` the expression matches (a match never spans lines), at most `maxMatchLines`; `more` when one more was there. */
function findMatchLines(re: RegExp, text: string, maxMatchLines: number): { found: FoundLine[]; more: boolean } {
  re.lastIndex = 0;
  const found: FoundLine[] = [];
  let lineNo = 1;
  let scanned = 0;
  let current: FoundLine | undefined;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (m[0].length === 0) {
      re.lastIndex++;
      if (m.index >= text.length) break;
    }
    if (m[0].includes('\n')) continue; // one line at a time, as grep matches
    if (current === undefined || m.index >= current.end) {
      if (found.length >= maxMatchLines) return { found, more: true };
      for (let i = text.indexOf('\n', scanned); i >= 0 && i < m.index; i = text.indexOf('\n', i + 1)) lineNo++;
      const start = m.index === 0 ? 0 : text.lastIndexOf('\n', m.index - 1) + 1;
      const nl = text.indexOf('\n', m.index);
      const end = nl < 0 ? text.length : nl;
      scanned = m.index;
      current = { lineNo, start, end, ranges: [] };
      found.push(current);
    }
    current.ranges.push({ start: m.index - current.start, end: m.index - current.start + m[0].length });
  }
  return { found, more: false };
}

/** The match lines in file order with up to `context` lines around each, every line once. */
function withContext(relPath: string, text: string, found: FoundLine[], context: number): SearchLine[] {
  const lines: SearchLine[] = [];
  let lastEmitted = 0; // line number
  for (let i = 0; i < found.length; i++) {
    const f = found[i] as FoundLine;
    if (context > 0) lines.push(...linesBefore(relPath, text, Math.max(lastEmitted + 1, f.lineNo - context), f.lineNo - 1, f.start));
    lines.push(matchLine(relPath, f.lineNo, text.slice(f.start, f.end), f.ranges));
    lastEmitted = f.lineNo;
    if (context > 0) {
      const next = found[i + 1];
      const to = Math.min(f.lineNo + context, next ? next.lineNo - 1 : Number.MAX_SAFE_INTEGER);
      const after = linesAfter(relPath, text, f.lineNo + 1, to, f.end);
      lines.push(...after);
      lastEmitted += after.length;
    }
  }
  return lines;
}

/** Context lines `from..to` (inclusive) just before the line that starts at `lineStart`. */
function linesBefore(relPath: string, text: string, from: number, to: number, lineStart: number): SearchLine[] {
  if (from > to) return [];
  const texts: string[] = [];
  let end = lineStart - 1; // the '\n' ending the line before
  for (let n = to; n >= from && end >= 0; n--) {
    const start = end === 0 ? 0 : text.lastIndexOf('\n', end - 1) + 1;
    texts.unshift(text.slice(start, end));
    end = start - 1;
  }
  const first = to - texts.length + 1;
  return texts.map((t, i) => contextLine(relPath, first + i, t));
}

/** Context lines `from..to` (inclusive) just after the line that ends at `lineEnd`. */
function linesAfter(relPath: string, text: string, from: number, to: number, lineEnd: number): SearchLine[] {
  const lines: SearchLine[] = [];
  let start = lineEnd + 1;
  for (let n = from; n <= to && start <= text.length; n++) {
    const nl = text.indexOf('\n', start);
    const end = nl < 0 ? text.length : nl;
    if (nl < 0 && start === text.length) break; // no line after a final newline
    lines.push(contextLine(relPath, n, text.slice(start, end)));
    if (nl < 0) break;
    start = nl + 1;
  }
  return lines;
}

function stripCr(text: string): string {
  return text.endsWith('\r') ? text.slice(0, -1) : text;
}

function contextLine(path: string, line: number, text: string): SearchLine {
  const { preview, offset } = cut(stripCr(text), 0);
  return { path, line, kind: 'context', text: preview, textOffset: offset, ranges: [] };
}

function matchLine(path: string, line: number, text: string, ranges: { start: number; end: number }[]): SearchLine {
  const clean = stripCr(text);
  const { preview, offset } = cut(clean, ranges[0]?.start ?? 0);
  const shifted = ranges
    .map((r) => ({ start: Math.max(0, r.start - offset), end: Math.min(preview.length, Math.min(r.end, clean.length) - offset) }))
    .filter((r) => r.end > r.start || (r.start === r.end && r.start <= preview.length));
  return { path, line, kind: 'match', text: preview, textOffset: offset, ranges: shifted };
}

/** A long line cut to SearchLimits.previewChars, starting a little before the first match. */
function cut(text: string, firstMatch: number): { preview: string; offset: number } {
  const max = SearchLimits.previewChars;
  if (text.length <= max) return { preview: text, offset: 0 };
  const offset = Math.max(0, Math.min(firstMatch - 40, text.length - max));
  return { preview: text.slice(offset, offset + max), offset };
}
