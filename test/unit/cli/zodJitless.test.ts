// server/cli/zodJitless.ts turns zod's generated parsers off for short-lived commands by setting zod's
// configuration on globalThis before zod loads. This holds the pinned zod to that: in a fresh process, set
// before zod is loaded, no parser is generated (no `new Function` beyond zod's one probe of whether it may),
// results are the same, and without it zod does generate them (so the count can tell).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';

const REPO_ROOT = path.resolve(__dirname, '../../..');

/** Runs a fresh Node that counts Function constructions, optionally calling parseSchemasWithoutJit first. */
function run(jitless: boolean): { generated: number; parsed: unknown; rejected: boolean } {
  const script = `
    let generated = 0;
    const F = Function;
    globalThis.Function = new Proxy(F, { construct(target, args) { generated++; return Reflect.construct(target, args); } });
    ${jitless ? "require('tsx/cjs'); require(process.env.ZOD_JITLESS).parseSchemasWithoutJit();" : ''}
    const { z } = require('zod');
    const Run = z.strictObject({ name: z.string(), phase: z.enum(['Ready', 'Succeeded']), spec: z.object({ runtime: z.string(), env: z.record(z.string(), z.string()) }) });
    const before = generated;
    const parsed = Run.parse({ name: 'a', phase: 'Ready', spec: { runtime: 'process', env: { K: 'v' } } });
    const rejected = !Run.safeParse({ name: 'a', phase: 'Gone', spec: { runtime: 'process', env: {} } }).success;
    process.stdout.write(JSON.stringify({ generated: generated - before, parsed, rejected }));
  `;
  const out = execFileSync(process.execPath, ['-e', script], { cwd: REPO_ROOT, env: { ...process.env, ZOD_JITLESS: path.join(REPO_ROOT, 'server/cli/zodJitless.ts') }, encoding: 'utf8' });
  return JSON.parse(out) as { generated: number; parsed: unknown; rejected: boolean };
}

describe('CLI: zod without generated parsers in short-lived commands', () => {
  it('zod generates a parser per object schema by default, none once parseSchemasWithoutJit ran first; results are the same', () => {
    const jit = run(false);
    const jitless = run(true);
    assert.ok(jit.generated >= 2, `zod generated ${jit.generated} function(s) by default: the count cannot tell the modes apart`);
    assert.ok(jitless.generated <= 1, `zod generated ${jitless.generated} function(s) with jitless set (one is its probe of whether it may)`);
    assert.deepEqual(jitless.parsed, jit.parsed);
    assert.equal(jitless.rejected, true);
    assert.equal(jit.rejected, true);
  });
});
