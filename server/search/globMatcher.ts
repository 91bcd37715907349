// Workspace-relative globs as editors write them in "files to include/exclude": `**` (any number of
// folders), `*` and `?` (within one name), `{a,b}` and `[a-z]`. A glob without a `/` matches a name at
// any depth (`*.log`, `dist`), and a glob that matches a folder matches everything under it. Globs are
// only ever matched against paths the walk produced; they can never name a place to read.
export type PathMatcher = (relPath: string) => boolean;

/** The regular expression (source) of one glob, anchored to a whole relative path. */
export function globToRegExpSource(glob: string): string {
  let out = '';
  let i = 0;
  let braceDepth = 0;
  while (i < glob.length) {
    const c = glob[i] as string;
    if (c === '*') {
      if (glob[i + 1] === '*') {
        // `**/` any folders (also none); a trailing `**` anything below.
        const slash = glob[i + 2] === '/';
        out += slash ? '(?:[^/]*(?:/[^/]*)*/)?' : '.*';
        i += slash ? 3 : 2;
        continue;
      }
      out += '[^/]*';
    } else if (c === '?') {
      out += '[^/]';
    } else if (c === '{') {
      braceDepth++;
      out += '(?:';
    } else if (c === '}' && braceDepth > 0) {
      braceDepth--;
      out += ')';
    } else if (c === ',' && braceDepth > 0) {
      out += '|';
    } else if (c === '[') {
      const close = glob.indexOf(']', i + 2);
      if (close < 0) {
        out += '\\[';
      } else {
        let body = glob.slice(i + 1, close);
        if (body.startsWith('!')) body = `^${body.slice(1)}`;
        out += `[${body.replace(/\\/g, '\\\\').replace(/\//g, '')}]`;
        i = close + 1;
        continue;
      }
    } else if (c === '\\') {
      // Backslashes are folder separators to Windows users; treat them as `/`.
      out += '/';
    } else {
      out += c.replace(/[.+^$()|\]\\]/g, '\\$&');
    }
    i++;
  }
  while (braceDepth-- > 0) out += ')';
  return out;
}

/** A matcher for any of `globs` (case-sensitive, as the sandbox's Linux file system is). */
export function compileGlobs(globs: readonly string[]): PathMatcher | undefined {
  if (globs.length === 0) return undefined;
  const sources = globs.map((g) => {
    const trimmed = g.replace(/^\.\//, '').replace(/\/+$/, '');
    const anywhere = !trimmed.includes('/') && !trimmed.includes('\\');
    const body = globToRegExpSource(trimmed);
    // Anywhere: the name of the entry or of any folder above it. Otherwise: from the root.
    // Either way, a match of a folder covers everything below it (`(?:/.*)?`).
    return anywhere ? `(?:^|/)${body}(?:/.*)?$` : `^${body}(?:/.*)?$`;
  });
  const re = new RegExp(sources.join('|'));
  return (relPath) => re.test(relPath);
}
