// The mocha entry point VS Code loads as `extensionTestsPath`: runs every compiled suite file
// beside it inside the extension host and reports failures through the returned promise.
import fs from 'node:fs';
import path from 'node:path';

// mocha is resolved from the repository's node_modules at run time (not bundled).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Mocha = require('mocha') as typeof import('mocha');

export function run(): Promise<void> {
  const grep = process.env.SANDBOX_SESSIONS_IT_GREP;
  const mocha = new Mocha({ ui: 'bdd', color: false, timeout: 60_000, reporter: 'spec', ...(grep ? { grep } : {}) });
  // The start-up log is read first, while it holds only the start: later suites stop daemons and cut connections on purpose.
  const first = 'startLog.test.js';
  const files = fs.readdirSync(__dirname).filter((f) => f.endsWith('.test.js') && f !== first).sort();
  for (const file of [first, ...files]) mocha.addFile(path.join(__dirname, file));
  return new Promise((resolve, reject) => {
    mocha.run((failures) => (failures > 0 ? reject(new Error(`${failures} integration test(s) failed`)) : resolve()));
  });
}
