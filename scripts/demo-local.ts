// `npm run demo`: the local runtime without an editor — opens a local sandbox (starting the
// gateway daemon if needed), runs a command in it, closes it with Drain and prints where its
// artifacts are. Run: tsx scripts/demo-local.ts  (this file also serves as the daemon entry
// when it re-launches itself with `gateway`).
import { runGatewayCommand } from '../server/cli/gateway';
import { ensureGateway } from '../server/gateway/daemonClient';
import { LocalGatewayClient, endpointPathOf } from '../server/gateway/localClient';
import { artifactFile } from '../server/local/artifactStore';
import { defaultStateDir } from '../server/local/stateRoot';

async function demo(): Promise<number> {
  const stateDir = defaultStateDir();
  const gw = await ensureGateway({ stateDir });
  console.log(`local gateway: ${gw.url} (pid ${gw.pid}, state ${stateDir})`);
  const client = new LocalGatewayClient(gw.url, gw.token);
  const created = await client.createRun('default', {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: { generateName: 'demo-' },
    spec: { runtime: 'process', mode: { session: { idleTimeoutSeconds: 600 } } },
  });
  const name = created.metadata.name ?? '';
  const run = await client.waitPhase('default', name, ['Ready'], 60_000);
  if (run.status?.phase !== 'Ready') throw new Error(`sandbox ${name} is ${run.status?.phase}: ${run.status?.message}`);
  console.log(`sandbox default/${name} is Ready at ${run.status.endpoint?.url}`);
  const command = 'uname -a > "$KRUNTIME_ARTIFACTS_DIR/uname.txt"; mkdir -p "$KRUNTIME_ARTIFACTS_DIR/report"; date -u > "$KRUNTIME_ARTIFACTS_DIR/report/when.txt"; echo "hello from $(pwd)"';
  console.log(`$ ${command}`);
  const result = await client.execute(endpointPathOf(run), { command: { shell: command } });
  process.stdout.write(Buffer.from(result.command?.stdout ?? '', 'base64'));
  console.log(`exit code ${result.command?.exitCode}; closing with Drain…`);
  await client.terminate('default', name, 'Drain');
  const done = await client.waitPhase('default', name, [], 120_000);
  console.log(`sandbox default/${name}: ${done.status?.phase} (${done.status?.message})`);
  const store = (done.status?.artifactStore as { filesystem?: { path?: string } } | undefined)?.filesystem?.path;
  for (const ref of done.status?.artifactRefs ?? []) {
    console.log(`  ${ref.name} (${ref.type}, ${ref.sizeBytes} bytes, ${ref.digest}) → ${store ? artifactFile(store, ref) : JSON.stringify(ref.location)}`);
  }
  console.log('stop the daemon with: sandbox-sessions gateway --stop');
  return done.status?.phase === 'Succeeded' ? 0 : 1;
}

const argv = process.argv.slice(2);
const main = argv[0] === 'gateway' ? runGatewayCommand(argv.slice(1), process) : demo();
main.then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`error: ${(err as Error).message}`);
    process.exit(1);
  },
);
