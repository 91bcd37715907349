// Quick Open's way of matching a typed name against a path: every space-separated piece of the
// query appears in the path in order (case-insensitive), and a score that ranks matches in the file
// name, at word starts and in one run above scattered ones. Used where this extension ranks paths
// itself (Go to File in Sandbox…) and to filter what the file search provider hands VS Code.

/** Whether every piece of `query` is a subsequence of `path` (ignoring case; `\` counts as `/`). */
export function fuzzyMatches(path: string, query: string): boolean {
  return fuzzyScore(path, query) !== undefined;
}

/** A score (higher is better), or undefined when `query` does not match `path`. */
export function fuzzyScore(path: string, query: string): number | undefined {
  const pieces = query.replace(/\\/g, '/').toLowerCase().split(/\s+/).filter((p) => p !== '');
  if (pieces.length === 0) return 0;
  const hay = path.toLowerCase();
  const nameStart = hay.lastIndexOf('/') + 1;
  let total = 0;
  for (const piece of pieces) {
    const inName = scoreFrom(path, hay, piece, nameStart);
    const anywhere = inName ?? scoreFrom(path, hay, piece, 0);
    if (anywhere === undefined) return undefined;
    total += anywhere + (inName !== undefined ? 100 : 0);
  }
  // Shorter paths first among equals.
  return total - path.length / 1000;
}

function scoreFrom(original: string, hay: string, needle: string, from: number): number | undefined {
  let score = 0;
  let at = from;
  let previous = -2;
  for (const ch of needle) {
    const found = hay.indexOf(ch, at);
    if (found < 0) return undefined;
    score += 1;
    if (found === previous + 1) score += 5; // one run
    const before = found === 0 ? '/' : (original[found - 1] as string);
    const camel = /[a-z0-9]/.test(before) && /[A-Z]/.test(original[found] as string);
    if (camel || before === '/' || before === '.' || before === '_' || before === '-') score += 3; // a word start
    previous = found;
    at = found + 1;
  }
  return score;
}
