// The import rules inside server/ (scripts/serverImports.ts): today's code follows them, the rules themselves have
// no cycle beyond the known exceptions, and the check does fail when a rule is broken — shown on synthetic imports
// run through the same parser and checker, so a checker that lets everything pass cannot go unnoticed.
import assert from 'node:assert/strict';
import path from 'node:path';
import {
  checkServerImports,
  collectServerImports,
  cyclesOf,
  importsOf,
  KNOWN_CYCLES,
  SERVER_IMPORT_RULES,
} from '../../../scripts/serverImports';

const REPO_ROOT = path.resolve(__dirname, '../../..');

describe('build: import rules between server/ folders', () => {
  it('every import in server/ follows the rules', () => {
    const imports = collectServerImports(REPO_ROOT);
    assert.ok(imports.length > 500, `the parser found the imports (${imports.length})`);
    assert.ok(
      imports.some((i) => i.from === 'server/activation/runner.ts' && i.to === 'server/sandboxes/workspaceMover.ts'),
      'a known cross-folder import is seen, resolved to its file',
    );
    assert.deepEqual(
      checkServerImports(imports).map((v) => v.message),
      [],
    );
  });

  it('the rules have no cycle other than the known exceptions', () => {
    const cycles = cyclesOf(SERVER_IMPORT_RULES).map(([a, b]) => `${a} ⇄ ${b}`);
    assert.deepEqual(cycles, KNOWN_CYCLES.map(([a, b]) => `${a} ⇄ ${b}`));
    assert.deepEqual(
      cyclesOf({ ...SERVER_IMPORT_RULES, bundle: ['platform', 'sessions'] }).map(([a, b]) => `${a} ⇄ ${b}`).sort(),
      [
        'bundle ⇄ sessions',
        'sessions ⇄ bundle',
        'sessions ⇄ activation',
        'sessions ⇄ sandboxes',
        'sessions ⇄ repository',
        'activation ⇄ bundle',
        'activation ⇄ sandboxes',
        'activation ⇄ repository',
        'sandboxes ⇄ bundle',
        'sandboxes ⇄ repository',
        'repository ⇄ bundle',
      ].sort(),
      'a rule that closes a loop is reported as cycles',
    );
  });

  it('fails when a rule is broken: a service importing rpc, an upward import, an import out of server/', () => {
    const violating = [
      "import { createMethodHandlers } from '../rpc/methods';",
      "import type { SandboxProvider } from '../sandboxes/provider';",
      "export { x } from '../../extension/sandboxes/connection';",
      "const lazy = () => import('../cli/args.js');",
      "import { Something } from './pack';",
      "import { z } from 'zod';",
      "import type { Run } from '../../protocol/kruntimes/run';",
    ].join('\n');
    const violations = checkServerImports(importsOf('server/bundle/synthetic.ts', violating));
    assert.deepEqual(
      violations.map((v) => [v.from, v.to]),
      [
        ['server/bundle/synthetic.ts', 'server/rpc/methods'],
        ['server/bundle/synthetic.ts', 'server/sandboxes/provider'],
        ['server/bundle/synthetic.ts', 'extension/sandboxes/connection'],
        ['server/bundle/synthetic.ts', 'server/cli/args.ts'],
      ],
    );
    assert.match(violations[0]?.message ?? '', /server\/bundle may not import server\/rpc/);
    assert.match(violations[2]?.message ?? '', /may import only server\/, protocol\/ and package\.json/);
  });

  it('a folder with no rule is reported, so a new folder gets one on purpose', () => {
    const violations = checkServerImports(importsOf('server/newthing/a.ts', "import { b } from '../bundle';"));
    assert.equal(violations.length, 1);
    assert.match(violations[0]?.message ?? '', /server\/newthing has no import rule/);
  });
});
