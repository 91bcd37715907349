// A piece of plain text that every match of a text query must contain, so that a fast byte search
// (GNU grep -F over the sandbox's folder) can pick the files worth reading and the exact matching
// (textMatcher) runs only on those. Only what is certain is kept: printable ASCII (a case-insensitive
// JavaScript expression without the `u` flag matches an ASCII letter only with an ASCII letter, as
// grep -i does in the C locale), never a line break, and for a regular expression only characters
// of a top-level sequence that no quantifier can remove. Anything not understood gives no literal
// (the caller then reads every file itself), never a wrong one.
import type { TextSearchQuery } from '../../protocol/search';

/** Shorter literals filter too little to be worth a second process. */
const MIN_LITERAL = 2;

export function requiredLiteral(query: Pick<TextSearchQuery, 'pattern' | 'isRegExp'>): string | undefined {
  const runs = query.isRegExp ? regexRuns(query.pattern) : literalRuns(query.pattern);
  if (runs === undefined) return undefined;
  let best = '';
  for (const run of runs) if (run.length > best.length) best = run;
  return best.length >= MIN_LITERAL ? best : undefined;
}

const isPlain = (ch: string): boolean => ch >= ' ' && ch <= '~';

/** A literal query: its printable-ASCII stretches (a match contains all of them). */
function literalRuns(pattern: string): string[] | undefined {
  if (pattern.includes('\n')) return undefined; // matches only within a line: nothing can match
  const runs: string[] = [];
  let run = '';
  for (const ch of pattern) {
    if (isPlain(ch)) run += ch;
    else {
      runs.push(run);
      run = '';
    }
  }
  runs.push(run);
  return runs;
}

/** A JavaScript regular expression (no `u` flag): the literal stretches of its top-level sequence, or undefined. */
function regexRuns(source: string): string[] | undefined {
  return new RegexScanner(source).scan();
}

/** Thrown inside the scanner when the expression is not understood: no literal is given. */
const NOT_UNDERSTOOD = Symbol('not understood');

/** One left-to-right pass over an expression's top level, collecting the stretches of plain characters every match has. */
class RegexScanner {
  private readonly runs: string[] = [];
  private run = '';
  private i = 0;

  constructor(private readonly source: string) {}

  scan(): string[] | undefined {
    try {
      while (this.i < this.source.length) this.step();
    } catch (err) {
      if (err === NOT_UNDERSTOOD) return undefined;
      throw err;
    }
    this.end();
    return this.runs;
  }

  /** Ends the current stretch (what follows is not adjacent to it in every match). */
  private end(): void {
    this.runs.push(this.run);
    this.run = '';
  }

  /** One top-level item at `i`: a group, a class, an anchor or wildcard, an escape or a character, with its quantifier. */
  private step(): void {
    const { source } = this;
    const c = source[this.i] as string;
    if (c === '|') throw NOT_UNDERSTOOD; // an alternative at the top: nothing is certain
    if (c === '(' || c === '[') {
      this.end();
      if (c === '(') this.skipGroup();
      else this.skipClass();
      this.quantifier();
      return;
    }
    if (c === ')' || c === ']' || c === '}' || c === '{') throw NOT_UNDERSTOOD; // not a plain character here
    if (c === '.' || c === '^' || c === '$') {
      this.end();
      this.i++;
      this.quantifier();
      return;
    }
    const ch = c === '\\' ? this.escaped() : source[this.i++];
    if (ch === undefined) {
      this.end(); // a class escape (\d, \w, \s, \b…): not a literal
      this.quantifier();
      return;
    }
    const min = this.quantifier();
    if (!isPlain(ch)) {
      this.end();
      return;
    }
    if (min === undefined) {
      this.run += ch;
    } else {
      if (min > 0) this.run += ch;
      this.end();
    }
  }

  /** The character an escape at `i` stands for (consumed), or undefined for a class escape such as \d. */
  private escaped(): string | undefined {
    const e = this.source[this.i + 1];
    if (e === undefined) throw NOT_UNDERSTOOD;
    this.i += 2;
    if (/[dDwWsSbB]/.test(e)) return undefined;
    if (/[A-Za-z0-9_]/.test(e)) throw NOT_UNDERSTOOD; // \x41, \u…, \cX, \k<…>, \1, \n, …: not followed here
    return e;
  }

  /** A quantifier at `i`: its minimum (and it is consumed), or undefined if there is none. */
  private quantifier(): number | undefined {
    const { source } = this;
    const c = source[this.i];
    let min: number | undefined;
    if (c === '*' || c === '?') min = 0;
    else if (c === '+') min = 1;
    else if (c === '{') {
      const m = /^\{(\d+)(?:,\d*)?\}/.exec(source.slice(this.i));
      if (!m) return undefined;
      min = Number(m[1]);
      this.i += m[0].length - 1;
    } else return undefined;
    this.i++;
    if (source[this.i] === '?') this.i++; // lazy
    return min;
  }

  /** Skips a class `[...]` starting at `i`. */
  private skipClass(): void {
    const { source } = this;
    this.i++;
    if (source[this.i] === '^') this.i++;
    while (this.i < source.length && source[this.i] !== ']') this.i += source[this.i] === '\\' ? 2 : 1;
    if (this.i >= source.length) throw NOT_UNDERSTOOD;
    this.i++;
  }

  /** Skips a group `(...)` starting at `i`, nested groups and classes included. */
  private skipGroup(): void {
    const { source } = this;
    let depth = 0;
    while (this.i < source.length) {
      const g = source[this.i];
      if (g === '\\') this.i += 2;
      else if (g === '[') this.skipClass();
      else {
        if (g === '(') depth++;
        else if (g === ')') depth--;
        this.i++;
        if (depth === 0) break;
      }
    }
    if (depth !== 0) throw NOT_UNDERSTOOD;
  }
}
