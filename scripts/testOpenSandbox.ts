// `npm run test:opensandbox`: the OpenSandbox suites (golden cases, behaviour, the product's
// client) against the simulator by default, or against a real OpenSandbox server when
// OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY are set (OPENSANDBOX_TARGET=simulator forces the
// simulator). Says up front which tests need the simulator and are skipped against a server.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '..');
const dir = path.join(root, 'test', 'unit', 'opensandbox');
const files = fs.readdirSync(dir).filter((f) => f.endsWith('.test.ts')).sort().map((f) => path.join(dir, f));
const real = process.env.OPENSANDBOX_TARGET !== 'simulator' && !!process.env.OPEN_SANDBOX_DOMAIN && !!process.env.OPEN_SANDBOX_API_KEY;

const simulatorOnly: string[] = [];
for (const file of files) {
  for (const m of fs.readFileSync(file, 'utf8').matchAll(/it\(`\$\{SIM_TAG\} ([^`]+)`/g)) simulatorOnly.push(`${path.basename(file)}: [simulator] ${m[1]}`);
}

if (real) {
  console.log(`test:opensandbox: against the real server at ${process.env.OPEN_SANDBOX_DOMAIN} (API key set; image ${process.env.OPEN_SANDBOX_TEST_IMAGE ?? 'ubuntu:24.04'}, OPEN_SANDBOX_TEST_IMAGE to change)`);
  console.log(`test:opensandbox: ${simulatorOnly.length} tests need the simulator (they inspect the sandbox from the host) and will be skipped:`);
} else {
  try {
    execFileSync('bwrap', ['--version'], { stdio: 'ignore' });
  } catch {
    console.error('test:opensandbox: the simulator runs commands under bubblewrap, which is missing (apt-get install bubblewrap)');
    process.exit(1);
  }
  console.log('test:opensandbox: against the simulator (test/fixtures/opensandbox, 127.0.0.1, bubblewrap); set OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY to use a real server');
  console.log(`test:opensandbox: ${simulatorOnly.length} tests need the simulator (skipped against a real server):`);
}
for (const t of simulatorOnly) console.log(`  - ${t}`);

const mocha = path.join(root, 'node_modules', '.bin', 'mocha');
const r = spawnSync(mocha, ['--no-config', '--node-option', 'import=tsx', '--timeout', '120000', '--reporter', 'spec', ...process.argv.slice(2), ...files], { stdio: 'inherit', cwd: root });
process.exit(r.status ?? 1);
