// Searching a sandbox whose files are not on this machine (as for kruntimes): find/grep as one
// command through a real local gateway's session, parsed and streamed; the file-API walk used when
// commands are refused; and a cancel that ends grep in the sandbox.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { SearchQuerySchema, type SearchQueryInput } from '../../../protocol/search';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { createLogger } from '../../../server/log';
import { LocalSandboxProvider } from '../../../server/sandboxes/localProvider';
import { gatewayTree } from '../../../server/search/gatewayTree';
import { SandboxSearchService, searchHostDirectory, searchThroughGateway } from '../../../server/search/searchService';
import { SearchRun } from '../../../server/search/searchRun';
import { searchTree } from '../../../server/search/treeSearch';
import { ImageClient } from '../../fixtures/sandboxes/imageClient';
import { until } from '../../fixtures/waits';

const REPO = path.resolve(__dirname, '../../..');
const q = (input: SearchQueryInput) => SearchQuerySchema.parse(input);

/** Pids of processes whose command line contains `marker` (Linux /proc). */
function processesWith(marker: string): number[] {
  const out: number[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(marker)) out.push(Number(name));
    } catch {
      // ended meanwhile
    }
  }
  return out;
}

describe('sandbox search through the session (find/grep command, file API)', function () {
  this.timeout(60_000);
  let work: string;
  let provider: LocalSandboxProvider;
  let client: GatewayClient;
  let connection: Awaited<ReturnType<LocalSandboxProvider['open']>>;
  let hostDir: string;
  let service: SandboxSearchService;
  let ref: Parameters<SandboxSearchService['search']>[0];

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'search-gw-'));
    provider = new LocalSandboxProvider({
      stateDir: path.join(work, 'state'),
      gatewayCommand: [process.execPath, '--import', 'tsx', path.join(REPO, 'server/main.ts'), 'gateway'],
      log: createLogger(fs.createWriteStream('/dev/null'), 'error'),
    });
    const sandbox = await provider.create({ provider: 'local', runtime: 'process', namespace: 'default' }, { waitForReady: true });
    ref = sandbox.ref;
    connection = await provider.open(sandbox.ref);
    client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token });
    hostDir = (await provider.hostDirectory(sandbox.ref)) as string;
    const put = (rel: string, contents: string | Buffer) => {
      fs.mkdirSync(path.dirname(path.join(hostDir, rel)), { recursive: true });
      fs.writeFileSync(path.join(hostDir, rel), contents);
    };
    put('src/app/main.ts', 'import x from "y";\nconst needle = 1; // needle\nexport default needle;\n');
    put('src/app/util.ts', 'function needles() {}\nconst Needle = 2;\n');
    put('src/lib/deep/widgetFactory.ts', 'line one\nline two\nneedle here\nline four\n');
    put('node_modules/pkg/index.js', 'needle in a dependency\n');
    put('image.bin', Buffer.concat([Buffer.from('needle'), Buffer.from([0, 1, 2])]));
    put('docs/readme.md', 'A needle\n');
    // Names a grep's `name:12:text` prefix would not tell apart, and one that a line cannot hold.
    put('src/we:ird-1-name.ts', 'needle: here\nnot this\n');
    put('src/dash-2-x.ts', 'a\nneedle\nb\n');
    put('notes/line\nbreak.txt', 'needle\n');
    const outside = path.join(work, 'outside');
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'needle-outside\n');
    fs.symlinkSync(outside, path.join(hostDir, 'escape'));
    service = new SandboxSearchService(new Map([['local', provider]]));
  });

  after(async () => {
    await client?.close();
    await provider?.dispose();
    await stopGateway({ stateDir: path.join(work, 'state') });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('finds the same text and files with grep/find in the sandbox as in place', async () => {
    for (const query of [
      q({ kind: 'text', pattern: 'needle' }),
      q({ kind: 'text', pattern: 'needle', isWordMatch: true, contextLines: 1, includes: ['**/*.ts'] }),
      q({ kind: 'text', pattern: 'Needle', isCaseSensitive: true }),
      q({ kind: 'files', pattern: 'wdgt' }),
      q({ kind: 'files', excludes: ['docs'] }),
    ]) {
      const viaCommand = await service.search(ref, query, { avoidHost: true });
      const inPlace = await searchHostDirectory(hostDir, query);
      assert.equal(viaCommand.strategy, 'command');
      const key = (r: typeof inPlace) => [...r.files, ...r.lines.map((l) => `${l.path}:${l.line}:${l.kind}:${l.text}:${JSON.stringify(l.ranges)}`)].sort();
      assert.deepEqual(key(viaCommand), key(inPlace), JSON.stringify(query));
      assert.ok(!key(viaCommand).some((k) => k.includes('node_modules') || k.includes('escape') || (query.kind === 'text' && k.includes('image.bin'))));
    }
  });

  it('finds the same in a BusyBox image (Alpine: no find -printf, no grep -Z or -I, an awk that reads no NUL)', async () => {
    const image = new ImageClient({ endpoint: connection.endpoint, token: connection.token });
    image.tools = 'busybox';
    const key = (r: Awaited<ReturnType<typeof searchHostDirectory>>) => [...r.files, ...r.lines.map((l) => `${l.path}:${l.line}:${l.kind}:${l.text}:${JSON.stringify(l.ranges)}`)].sort();
    try {
      for (const query of [
        q({ kind: 'text', pattern: 'needle' }),
        q({ kind: 'text', pattern: 'needle', isWordMatch: true, contextLines: 1 }),
        q({ kind: 'text', pattern: 'needle', contextLines: 1, includes: ['**/*.ts'] }),
        q({ kind: 'text', pattern: 'Needle', isCaseSensitive: true }),
        q({ kind: 'text', pattern: 'ne+dle:', isRegExp: true }),
        // No name there holds a `:`: its batch is grepped whole.
        q({ kind: 'text', pattern: 'needle', folder: 'src/app' }),
        q({ kind: 'files', pattern: 'wdgt' }),
      ]) {
        const viaBusybox = await searchThroughGateway(image, query);
        const inPlace = await searchHostDirectory(hostDir, query);
        assert.equal(viaBusybox.strategy, 'command', JSON.stringify(query));
        // A name holding a newline is left out of a text search there (stat gives a line per file).
        const expected = key(inPlace).filter((k) => query.kind === 'files' || !k.startsWith('notes/line\n'));
        assert.deepEqual(key(viaBusybox), expected, JSON.stringify(query));
        if (query.kind === 'text' && query.pattern === 'needle' && query.contextLines === 0 && query.folder === '') {
          assert.ok(expected.some((k) => k.startsWith('src/we:ird-1-name.ts:1:match:needle: here')));
          assert.ok(expected.some((k) => k.startsWith('src/dash-2-x.ts:2:match:')));
          // The binary file's line (grep without -I prints it) is dropped, as GNU grep's -I skips it.
          assert.equal(viaBusybox.stats.skippedBinary, 1);
        }
      }
      assert.ok(image.commands.every((argv) => argv[0] === 'sh'));
      // An expression that BusyBox's grep cannot read is the query's error, as with GNU grep.
      await assert.rejects(searchThroughGateway(image, q({ kind: 'text', pattern: '[[:foo:]]', isRegExp: true })), /grep in the sandbox: grep: bad regex/);

      // The bounds hold there too (read access times say what grep read): past the byte budget and over the
      // per-file limit, nothing.
      const bounded = path.join(hostDir, 'bounded');
      fs.mkdirSync(bounded);
      for (let i = 1; i <= 12; i++) fs.writeFileSync(path.join(bounded, `f${String(i).padStart(2, '0')}.txt`), `needle ${i}\n`.padEnd(1024, 'x'));
      fs.writeFileSync(path.join(bounded, 'large.txt'), 'needle large\n'.padEnd(4096, 'y'));
      const readSince = () => fs.readdirSync(bounded).filter((n) => fs.statSync(path.join(bounded, n)).atimeMs > 0).sort();
      for (const n of fs.readdirSync(bounded)) fs.utimesSync(path.join(bounded, n), 0, Date.now() / 1000);
      assert.deepEqual(readSince(), [], 'the file system records reads (relatime): nothing read yet');
      const budget = await searchThroughGateway(image, q({ kind: 'text', pattern: 'needle', folder: 'bounded', maxTotalBytes: 5 * 1024 + 100, maxFileBytes: 2048 }));
      assert.equal(budget.stopped, 'bytes');
      assert.equal(budget.stats.filesSearched, 5);
      assert.equal(budget.stats.bytesSearched, 5 * 1024);
      const found = [...new Set(budget.lines.map((l) => path.basename(l.path)))].sort();
      assert.equal(found.length, 5);
      assert.deepEqual(readSince(), found);
      assert.ok(!found.includes('large.txt'));
      const large = await searchThroughGateway(image, q({ kind: 'text', pattern: 'needle', folder: 'bounded', maxFileBytes: 2048 }));
      assert.equal(large.stats.skippedLarge, 1);
      assert.equal(large.lines.filter((l) => l.path === 'bounded/large.txt').length, 0);
      fs.rmSync(bounded, { recursive: true });

      // An image without `stat` is searched through the file API: the same lines, and nothing is reported as wrong.
      image.busyboxWithout = ['stat'];
      const query = q({ kind: 'text', pattern: 'needle' });
      const walked = await searchThroughGateway(image, query);
      assert.equal(walked.strategy, 'files-api');
      assert.deepEqual(key(walked), key(await searchHostDirectory(hostDir, query)));
    } finally {
      await image.close();
    }
  });

  it('says what grep in the sandbox said of an expression it cannot read (JavaScript can)', async () => {
    await assert.rejects(service.search(ref, q({ kind: 'text', pattern: '[[:foo:]]', isRegExp: true }), { avoidHost: true }), /grep in the sandbox: grep: Invalid character class name/);
  });

  it('refuses a folder that leads out of the workspace through a link', async () => {
    await assert.rejects(service.search(ref, q({ kind: 'text', pattern: 'needle', folder: 'escape' }), { avoidHost: true }), /outside the sandbox's workspace/);
  });

  it('walks the file API when commands are not an option', async () => {
    const run = new SearchRun(q({ kind: 'text', pattern: 'needle' }), undefined, undefined);
    await searchTree(gatewayTree(client), '', run, { concurrency: 4 });
    const result = run.finish('files-api');
    const inPlace = await searchHostDirectory(hostDir, q({ kind: 'text', pattern: 'needle' }));
    assert.deepEqual(result.lines.map((l) => `${l.path}:${l.line}`).sort(), inPlace.lines.map((l) => `${l.path}:${l.line}`).sort());
    assert.equal(result.stats.skippedBinary, 1);
  });

  it('cancel ends grep in the sandbox: no grep is left running', async () => {
    // A back-reference makes GNU grep use its backtracking matcher: minutes over these lines.
    const marker = `zq${process.pid}x`;
    fs.writeFileSync(path.join(hostDir, 'slow.txt'), `${'a'.repeat(4001)}\n`.repeat(200));
    const controller = new AbortController();
    const search = searchThroughGateway(client, q({ kind: 'text', pattern: `^(a*)\\1$|${marker}`, isRegExp: true, timeoutMs: 120_000 }), { signal: controller.signal });
    const settled = search.then(
      () => 'resolved',
      (err: Error) => err.name,
    );
    await until('grep runs in the sandbox', () => processesWith(marker).length > 0);
    controller.abort();
    const aborted = Date.now();
    assert.equal(await settled, 'AbortError');
    await until('grep has ended', () => processesWith(marker).length === 0, 10_000);
    // Left alone, this grep runs for minutes (until the command's 120 s timeout).
    assert.ok(Date.now() - aborted < 10_000, `grep ended ${Date.now() - aborted} ms after the cancel`);
  });
});
