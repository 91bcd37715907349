// `npm run test:cluster`: the kruntimes suite (test/unit/kruntimes) against a real cluster when
// KUBECONFIG names one — with KRUNTIMES_TEST_CONTEXT, KRUNTIMES_TEST_NAMESPACE and
// KRUNTIMES_TEST_RUNTIME saying where session Runs may be created — else against the cluster
// simulator (which `npm test` also runs), once per upstream era: every suite has a `describe` for
// era C and one for era D (SANDBOX_SESSIONS_SIMULATOR_ERA=C or D runs only that one). Tests that
// must reach inside the cluster are reported as pending on a real cluster, each with the reason.
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const real = Boolean(process.env.KUBECONFIG);
if (real && !process.env.KRUNTIMES_TEST_CONTEXT) {
  process.stderr.write('KUBECONFIG is set: also set KRUNTIMES_TEST_CONTEXT (and KRUNTIMES_TEST_NAMESPACE, KRUNTIMES_TEST_RUNTIME) to run against that cluster\n');
  process.exit(2);
}
process.stdout.write(real ? `kruntimes suite against context ${process.env.KRUNTIMES_TEST_CONTEXT} of ${process.env.KUBECONFIG}\n` : `kruntimes suite against the cluster simulator, era ${process.env.SANDBOX_SESSIONS_SIMULATOR_ERA ?? 'C and D'} (set KUBECONFIG for a real cluster)\n`);
const mocha = path.join(__dirname, '..', 'node_modules', '.bin', 'mocha');
const result = spawnSync(mocha, ['--no-config', '--node-option', 'import=tsx', '--timeout', '180000', 'test/unit/kruntimes/*.test.ts'], {
  stdio: 'inherit',
  env: { ...process.env, ...(real ? { SANDBOX_SESSIONS_CLUSTER: 'real' } : {}) },
});
process.exit(result.status ?? 1);
