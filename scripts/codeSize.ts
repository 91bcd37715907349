// Code size check (issue 17's acceptance: no product file over 400 lines, no function over 80): lists the files
// and the functions over the limits in server/, extension/ and protocol/ (or in the paths given), with counts, and
// exits 1 when any is over. Functions are found with the TypeScript compiler API (declarations, methods,
// accessors, constructors, function expressions and arrow functions; a function's lines include its nested ones).
//   npm run size:check [-- <file or folder>…]
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

export const MAX_FILE_LINES = 400;
export const MAX_FUNCTION_LINES = 80;
const DEFAULT_ROOTS = ['server', 'extension', 'protocol'];
const REPO_ROOT = path.resolve(__dirname, '..');

export interface FunctionSize {
  file: string;
  name: string;
  line: number;
  lines: number;
}

export interface FileSize {
  file: string;
  lines: number;
  functions: FunctionSize[];
}

function lineCount(text: string): number {
  if (text === '') return 0;
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

function nameOf(node: ts.Node, source: ts.SourceFile): string {
  const named = (node as { name?: ts.Node }).name;
  if (named !== undefined && (ts.isIdentifier(named) || ts.isStringLiteral(named) || ts.isPrivateIdentifier(named) || ts.isComputedPropertyName(named))) {
    return named.getText(source);
  }
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (parent !== undefined && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name !== undefined) {
    return parent.name.getText(source);
  }
  return '<anonymous>';
}

function isFunction(node: ts.Node): node is ts.FunctionLikeDeclaration {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node)
  );
}

/** The sizes of one file's text: its line count and every function with a body. */
export function measureSource(file: string, text: string): FileSize {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const functions: FunctionSize[] = [];
  const visit = (node: ts.Node): void => {
    if (isFunction(node) && node.body !== undefined) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      functions.push({ file, name: nameOf(node, source), line: first + 1, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { file, lines: lineCount(text), functions };
}

function tsFiles(target: string): string[] {
  const stat = fs.statSync(target);
  if (stat.isFile()) return /\.tsx?$/.test(target) && !target.endsWith('.d.ts') ? [target] : [];
  return fs
    .readdirSync(target, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((e) => (e.name === 'node_modules' ? [] : tsFiles(path.join(target, e.name))));
}

function main(argv: string[]): number {
  const roots = argv.length > 0 ? argv : DEFAULT_ROOTS.map((r) => path.join(REPO_ROOT, r));
  const files = roots.flatMap((r) => tsFiles(path.resolve(r))).map((f) => measureSource(path.relative(REPO_ROOT, f), fs.readFileSync(f, 'utf8')));
  const functions = files.flatMap((f) => f.functions);
  const longFiles = files.filter((f) => f.lines > MAX_FILE_LINES).sort((a, b) => b.lines - a.lines);
  const longFunctions = functions.filter((f) => f.lines > MAX_FUNCTION_LINES).sort((a, b) => b.lines - a.lines);
  if (longFiles.length > 0) console.log(`Files over ${MAX_FILE_LINES} lines:`);
  for (const f of longFiles) console.log(`  ${String(f.lines).padStart(5)}  ${f.file}`);
  if (longFunctions.length > 0) console.log(`Functions over ${MAX_FUNCTION_LINES} lines:`);
  for (const f of longFunctions) console.log(`  ${String(f.lines).padStart(5)}  ${f.file}:${f.line}  ${f.name}`);
  console.log(
    `${files.length} files, ${longFiles.length} over ${MAX_FILE_LINES} lines; ` +
      `${functions.length} functions, ${longFunctions.length} over ${MAX_FUNCTION_LINES} lines`,
  );
  return longFiles.length + longFunctions.length > 0 ? 1 : 0;
}

if (require.main === module) process.exitCode = main(process.argv.slice(2));
