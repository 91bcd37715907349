// The bounds of a search in a kruntimes sandbox hold where the files are: `sandboxes/search` through the
// cluster simulator (era D, today's upstream, and era C) runs find/awk/grep as one command in the
// sandbox. Read access times prove which files grep read (relatime: a read after an access time set
// in the past moves it): past the byte budget and over the per-file size limit, none; the search
// says so (`stopped: "bytes"`, `limitHit`, `skippedLarge`). The result and time bounds end the
// command in the sandbox: no grep is left running.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { SandboxRef } from '../../../protocol/sandboxes';
import { SearchQuerySchema, type SearchQueryInput } from '../../../protocol/search';
import { SandboxSearchService } from '../../../server/search/searchService';
import { startClusterTarget, type ClusterTarget } from '../../fixtures/cluster/target';
import { until } from '../../fixtures/waits';

const q = (input: SearchQueryInput) => SearchQuerySchema.parse(input);
const KIB64 = 64 * 1024;

/** Pids of processes whose command line contains `marker` (Linux /proc; the simulator runs sandboxes on this machine). */
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

for (const era of ['D', 'C'] as const) {
  describe(`search in a kruntimes sandbox: byte, result and time bounds hold in the sandbox (simulator, era ${era})`, function () {
    this.timeout(120_000);
    let target: ClusterTarget;
    let client: GatewayClient;
    let service: SandboxSearchService;
    let ref: SandboxRef;
    const marker = `zq${process.pid}${era}x`;

    /** Runs a shell command in the sandbox; its stdout. */
    async function sh(shell: string): Promise<string> {
      const r = await client.execute({ command: { shell } });
      assert.equal(r.command?.exitCode, 0, Buffer.from(r.command?.stderr ?? '', 'base64').toString());
      return Buffer.from(r.command?.stdout ?? '', 'base64').toString();
    }

    /** The files below `dir` grep has read since their access time was set to 1970 (`touch -a -d @0`). */
    async function readSince(dir: string): Promise<string[]> {
      const out = await sh(`cd ${dir} && find . -type f -printf '%A@ %P\\n'`);
      return out
        .trim()
        .split('\n')
        .filter((l) => !l.startsWith('0 ') && !l.startsWith('0.'))
        .map((l) => l.slice(l.indexOf(' ') + 1))
        .sort();
    }

    before(async () => {
      target = await startClusterTarget({ era });
      const provider = target.provider();
      const created = await provider.create(target.spec(), { waitForReady: true });
      ref = created.ref;
      const c = await provider.open(ref);
      client = new GatewayClient({ endpoint: c.endpoint, token: c.token, tls: c.tls });
      service = new SandboxSearchService(new Map([['kruntimes', provider]]));
      // 30 files of exactly 64 KiB, each with the needle on its first line.
      await sh(
        `mkdir -p budget && for i in $(seq 1 30); do { printf '${marker} needle %s\\n' $i; head -c ${KIB64} /dev/zero | tr '\\0' 'x'; } | head -c ${KIB64} > budget/f$i.txt; done`,
      );
      // A 3 MiB file and a small one, both with the needle.
      await sh(`mkdir -p large && { printf '${marker} big\\n'; head -c 3145728 /dev/zero | tr '\\0' 'y'; } > large/big.txt && printf '${marker} small\\n' > large/small.txt`);
    });

    after(async () => {
      await client?.close();
      await target?.stop();
    });

    it('stops at the byte budget: grep reads the files within it and no other, and the search says `stopped: bytes`', async () => {
      await sh(`find budget -type f -exec touch -a -d @0 {} +`);
      assert.deepEqual(await readSince('budget'), [], 'the file system records reads (relatime): nothing read yet');
      const result = await service.search(ref, q({ kind: 'text', pattern: marker, folder: 'budget', maxTotalBytes: 5 * KIB64 + 100 }));
      assert.equal(result.strategy, 'command');
      assert.equal(result.stopped, 'bytes');
      assert.equal(result.limitHit, true);
      assert.equal(result.stats.bytesSearched, 5 * KIB64);
      assert.equal(result.stats.filesSearched, 5);
      const found = [...new Set(result.lines.map((l) => l.path.replace(/^budget\//, '')))].sort();
      assert.equal(found.length, 5, JSON.stringify(found));
      // At the source: exactly the five files within the budget were read in the sandbox.
      assert.deepEqual(await readSince('budget'), found);
      await until('no grep runs', () => processesWith(marker).length === 0);
    });

    it('skips a file over maxFileBytes without reading it, and counts it', async () => {
      await sh(`find large -type f -exec touch -a -d @0 {} +`);
      const result = await service.search(ref, q({ kind: 'text', pattern: marker, folder: 'large', maxFileBytes: 1024 * 1024 }));
      assert.equal(result.strategy, 'command');
      assert.deepEqual(
        result.lines.map((l) => l.path),
        ['large/small.txt'],
      );
      assert.equal(result.stats.skippedLarge, 1);
      assert.equal(result.limitHit, false);
      assert.deepEqual(await readSince('large'), ['small.txt']);
    });

    it('stops at the result limit and at the time limit; grep does not go on in the sandbox', async () => {
      // Two matching lines, then lines on which a back-reference keeps GNU grep busy for minutes.
      await sh(`mkdir -p slow && { printf '${marker} one\\n${marker} two\\n'; for i in $(seq 1 200); do head -c 4001 /dev/zero | tr '\\0' a; echo; done; } > slow/s.txt`);
      const pattern = `${marker}|^(a*)\\1$`;
      const byResults = await service.search(ref, q({ kind: 'text', pattern, isRegExp: true, folder: 'slow', maxResults: 1, timeoutMs: 120_000 }));
      assert.equal(byResults.strategy, 'command');
      assert.equal(byResults.stopped, 'results');
      assert.deepEqual(
        byResults.lines.map((l) => l.line),
        [1],
      );
      await until('grep has ended after the result limit', () => processesWith(marker).length === 0);

      const started = Date.now();
      const byTime = await service.search(ref, q({ kind: 'text', pattern: `^(a*)\\1$|${marker}zz`, isRegExp: true, folder: 'slow', timeoutMs: 1500 }));
      assert.equal(byTime.stopped, 'time');
      assert.ok(Date.now() - started < 15_000, `the search took ${Date.now() - started} ms past its 1.5 s bound`);
      await until('grep has ended after the time limit', () => processesWith(marker).length === 0);
    });
  });
}
