// Which part of server/ may import which (DESIGN.md: services never import rpc; the CLI and the companion wiring
// sit on top). A part is a folder of server/ or one of its top-level files. The rules below are the graph the code
// had when they were written down (issue 17), so a new edge is a decision someone makes on purpose: add it here, with
// docs/architecture.md, or move the code. Outside server/ a server file may import only protocol/ and package.json.
// Checked by test/unit/build/serverImports.test.ts; `npx tsx scripts/serverImports.ts` prints the graph.
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** Part → the parts it may import. A part always may import itself. */
export const SERVER_IMPORT_RULES: Readonly<Record<string, readonly string[]>> = {
  // Top-level files.
  'main.ts': ['cli', 'version.ts'],
  'version.ts': [],
  'log.ts': [],
  'locations.ts': ['local', 'repository'],
  // The opening snapshots live in the state root (local/stateRoot.ts).
  'companionServices.ts': ['activation', 'local', 'log.ts', 'ports', 'repository', 'sandboxes', 'sessions'],
  // The one (service, code) → JSON-RPC / MCP / exit / HTTP table; it reads the services' code unions, no service imports it.
  'errorMapping.ts': ['gateway', 'local', 'sandboxes'],
  // Foundations.
  platform: [],
  bundle: ['platform'],
  // A create or commit reads the bundle's manifest: it must be packed for the session it is committed to (bundleIdentity.ts).
  repository: ['bundle', 'platform'],
  local: ['platform'],
  gateway: ['local', 'platform'],
  // Services.
  sandboxes: ['bundle', 'gateway', 'local', 'log.ts', 'repository'],
  activation: ['bundle', 'log.ts', 'platform', 'repository', 'sandboxes'],
  // What a sandbox changed since a revision is read with the bundle's own scan and snapshot policy (sandboxChanges.ts).
  // An opening snapshot's record is one of local's crash-safe record files (openingSnapshots.ts).
  sessions: ['activation', 'bundle', 'local', 'log.ts', 'repository', 'sandboxes'],
  search: ['bundle', 'sandboxes'],
  ports: ['log.ts', 'sandboxes'],
  mcp: ['companionServices.ts', 'errorMapping.ts', 'local', 'log.ts', 'sandboxes', 'search', 'sessions', 'version.ts'],
  // The faces: JSON-RPC and the command line.
  rpc: ['activation', 'bundle', 'errorMapping.ts', 'log.ts', 'ports', 'sandboxes', 'search', 'sessions', 'version.ts'],
  cli: ['activation', 'bundle', 'companionServices.ts', 'errorMapping.ts', 'gateway', 'local', 'log.ts', 'mcp', 'ports', 'repository', 'rpc', 'sandboxes', 'sessions'],
};

/**
 * Cycles between parts that the code has today, allowed until they are cut. Each is `[a, b]` where a imports b and
 * b (perhaps through others) imports a. None today: keep it that way.
 */
export const KNOWN_CYCLES: readonly (readonly [string, string])[] = [];

export interface ServerImport {
  /** Repository-relative, `/`-separated: the importing file and the imported module. */
  from: string;
  to: string;
}

export interface ImportViolation extends ServerImport {
  message: string;
}

/** The part of server/ a repository-relative path belongs to (`sessions`, `main.ts`), or undefined outside it. */
export function partOf(file: string): string | undefined {
  const segments = file.split('/');
  if (segments[0] !== 'server' || segments.length < 2) return undefined;
  return segments[1];
}

/**
 * Repository-relative module paths a file imports (static, export-from, `import type`, dynamic `import('…')` with a
 * literal). `resolve` turns a joined specifier into the file it names (default: `.js` → `.ts`, else as written).
 */
export function importsOf(file: string, text: string, resolve: (joined: string) => string = (p) => p.replace(/\.js$/, '.ts')): ServerImport[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: ServerImport[] = [];
  const add = (specifier: string): void => {
    if (!specifier.startsWith('.')) return; // a package (node:, zod, …)
    out.push({ from: file, to: resolve(path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier))) });
  };
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
      add(node.arguments[0].text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      add(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** Every import of every .ts file under `<repoRoot>/server`. */
export function collectServerImports(repoRoot: string): ServerImport[] {
  const walk = (dir: string): string[] =>
    fs.readdirSync(path.join(repoRoot, dir), { withFileTypes: true }).flatMap((e) => {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) return walk(rel);
      return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [rel] : [];
    });
  const isFile = (rel: string): boolean => fs.statSync(path.join(repoRoot, rel), { throwIfNoEntry: false })?.isFile() === true;
  const resolve = (joined: string): string => {
    const ts = joined.replace(/\.js$/, '.ts');
    if (isFile(ts)) return ts;
    if (isFile(`${joined}.ts`)) return `${joined}.ts`;
    if (isFile(`${joined}/index.ts`)) return `${joined}/index.ts`;
    return joined;
  };
  return walk('server').flatMap((file) => importsOf(file, fs.readFileSync(path.join(repoRoot, file), 'utf8'), resolve));
}

/** The imports that break a rule, each with a message saying which rule and what to do. */
export function checkServerImports(imports: readonly ServerImport[], rules: Readonly<Record<string, readonly string[]>> = SERVER_IMPORT_RULES): ImportViolation[] {
  const violations: ImportViolation[] = [];
  for (const imp of imports) {
    const from = partOf(imp.from);
    if (from === undefined) continue;
    const to = partOf(imp.to);
    if (to === undefined) {
      if (!imp.to.startsWith('protocol/') && imp.to !== 'package.json') {
        violations.push({ ...imp, message: `${imp.from} imports ${imp.to}: server/ may import only server/, protocol/ and package.json` });
      }
      continue;
    }
    if (to === from) continue;
    const allowed = rules[from];
    if (allowed === undefined) {
      violations.push({ ...imp, message: `${imp.from}: server/${from} has no import rule; add one to scripts/serverImports.ts (and docs/architecture.md)` });
    } else if (!allowed.includes(to)) {
      violations.push({ ...imp, message: `${imp.from} imports ${imp.to}: server/${from} may not import server/${to} (scripts/serverImports.ts)` });
    }
  }
  return violations;
}

/** Pairs [a, b] of the rules where a may import b and b may (through others) import a. */
export function cyclesOf(rules: Readonly<Record<string, readonly string[]>>): [string, string][] {
  const reaches = (start: string, goal: string): boolean => {
    const seen = new Set<string>();
    const stack = [start];
    while (stack.length > 0) {
      const part = stack.pop() as string;
      if (part === goal) return true;
      if (seen.has(part)) continue;
      seen.add(part);
      stack.push(...(rules[part] ?? []));
    }
    return false;
  };
  return Object.entries(rules).flatMap(([a, targets]) => targets.filter((b) => reaches(b, a)).map((b): [string, string] => [a, b]));
}

/** The graph the code has: part → parts it imports, sorted. */
export function graphOf(imports: readonly ServerImport[]): Record<string, string[]> {
  const graph: Record<string, Set<string>> = {};
  for (const imp of imports) {
    const from = partOf(imp.from);
    const to = partOf(imp.to);
    if (from === undefined || to === undefined || from === to) continue;
    (graph[from] ??= new Set()).add(to);
  }
  return Object.fromEntries(Object.entries(graph).map(([k, v]) => [k, [...v].sort()]));
}

if (require.main === module) {
  const imports = collectServerImports(path.resolve(__dirname, '..'));
  for (const [part, targets] of Object.entries(graphOf(imports)).sort(([a], [b]) => a.localeCompare(b))) console.log(`${part} → ${targets.join(', ')}`);
  const violations = checkServerImports(imports);
  for (const v of violations) console.log(`violation: ${v.message}`);
  process.exitCode = violations.length > 0 ? 1 : 0;
}
