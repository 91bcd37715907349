// The size check behind `npm run size:check` (scripts/codeSize.ts): a file's lines, and every function found by the
// TypeScript parser with its name and length, so the report names what to cut and the limits are counted right.
import assert from 'node:assert/strict';
import { MAX_FUNCTION_LINES, measureSource } from '../../../scripts/codeSize';

const body = (lines: number): string => Array.from({ length: lines - 2 }, (_, i) => `  const v${i} = ${i};`).join('\n');

describe('build: code size check', () => {
  it('counts file lines and finds declarations, methods, arrow functions and constructors by name', () => {
    const text = [
      `function long() {\n${body(MAX_FUNCTION_LINES + 1)}\n}`,
      `const arrow = () => {\n${body(MAX_FUNCTION_LINES)}\n};`,
      'class C {\n  constructor() {}\n  method(): void {\n    [1].map((x) => x);\n  }\n}',
      'export const table = { handler: function () { return 1; } };',
      'declare function bodiless(): void;',
    ].join('\n');
    const size = measureSource('x.ts', `${text}\n`);
    assert.equal(size.lines, text.split('\n').length);
    const found = size.functions.map((f) => `${f.name}:${f.line}:${f.lines}`);
    assert.deepEqual(found, [
      `long:1:${MAX_FUNCTION_LINES + 1}`,
      `arrow:${MAX_FUNCTION_LINES + 2}:${MAX_FUNCTION_LINES}`,
      `constructor:${2 * MAX_FUNCTION_LINES + 3}:1`,
      `method:${2 * MAX_FUNCTION_LINES + 4}:3`,
      `<anonymous>:${2 * MAX_FUNCTION_LINES + 5}:1`,
      `handler:${2 * MAX_FUNCTION_LINES + 8}:1`,
    ]);
    assert.deepEqual(
      size.functions.filter((f) => f.lines > MAX_FUNCTION_LINES).map((f) => f.name),
      ['long'],
      'exactly the function over the limit is over it',
    );
  });
});
