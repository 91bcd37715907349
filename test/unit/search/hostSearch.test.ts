// Searching a local sandbox's folder in place (what `sandboxes/search` does for the local runtime):
// what is found, what is never looked at (outside the workspace, through links, binaries, default
// exclusions), the bounds (results, bytes, file size, time) and cancel.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SearchQuerySchema, type SearchLine, type SearchPartial, type SearchQueryInput, type SearchResult, type TextSearchQuery } from '../../../protocol/search';
import { companionMethods } from '../../../protocol/companion';
import { searchHostDirectory } from '../../../server/search/searchService';
import { SearchRun } from '../../../server/search/searchRun';
import { searchTree, type TreeSource } from '../../../server/search/treeSearch';
import { SearchPathError } from '../../../server/search/hostTree';
import { Listing, gnuGrepAvailable } from '../../../server/search/hostGrep';
import { createSearchFilter } from '../../../server/search/searchFilter';
import { requiredLiteral } from '../../../server/search/requiredLiteral';

const q = (input: SearchQueryInput) => SearchQuerySchema.parse(input);

function write(root: string, rel: string, contents: string | Buffer): void {
  fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
  fs.writeFileSync(path.join(root, rel), contents);
}

const matchLines = (r: SearchResult) => r.lines.filter((l) => l.kind === 'match').map((l) => `${l.path}:${l.line}`).sort();

describe('sandbox search in place (local sandbox folder)', () => {
  let work: string;
  let root: string;
  let outside: string;

  before(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'search-'));
    root = path.join(work, 'workspace');
    outside = path.join(work, 'outside');
    write(outside, 'secret.txt', 'needle-outside\n');
    write(root, 'src/app/main.ts', 'import x from "y";\nconst needle = 1; // needle\nexport default needle;\n');
    write(root, 'src/app/util.ts', 'function needles() {}\nconst Needle = 2;\n');
    write(root, 'src/lib/deep/nested/widgetFactory.ts', 'line one\nline two\nneedle here\nline four\nline five\n');
    write(root, 'README.md', 'A needle in a haystack\n');
    write(root, 'node_modules/pkg/index.js', 'needle in a dependency\n');
    write(root, '.git/config', 'needle in git\n');
    write(root, 'build.log', 'needle in a log\n');
    write(root, 'image.bin', Buffer.concat([Buffer.from('needle'), Buffer.from([0, 1, 2, 3]), Buffer.from('needle')]));
    // Links out of the workspace, to a folder and to a file: never followed.
    fs.symlinkSync(outside, path.join(root, 'escape'));
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'src/secret-link.txt'));
  });

  after(() => fs.rmSync(work, { recursive: true, force: true }));

  it('finds files by a fuzzy name, leaving out node_modules, .git and logs unless asked', async () => {
    const fuzzy = await searchHostDirectory(root, q({ kind: 'files', pattern: 'wdgfac' }));
    assert.deepEqual(fuzzy.files, ['src/lib/deep/nested/widgetFactory.ts']);
    assert.equal(fuzzy.strategy, 'host');
    const all = await searchHostDirectory(root, q({ kind: 'files' }));
    assert.deepEqual(all.files.sort(), ['README.md', 'image.bin', 'src/app/main.ts', 'src/app/util.ts', 'src/lib/deep/nested/widgetFactory.ts']);
    const everything = await searchHostDirectory(root, q({ kind: 'files', useDefaultExcludes: false }));
    for (const f of ['node_modules/pkg/index.js', '.git/config', 'build.log']) assert.ok(everything.files.includes(f), f);
  });

  it('never follows a symbolic link out of the workspace (folder or file)', async () => {
    const names = await searchHostDirectory(root, q({ kind: 'files', useDefaultExcludes: false }));
    assert.ok(!names.files.some((f) => f.startsWith('escape') || f.includes('secret')), names.files.join(', '));
    const text = await searchHostDirectory(root, q({ kind: 'text', pattern: 'needle-outside', useDefaultExcludes: false }));
    assert.deepEqual(text.lines, []);
    await assert.rejects(searchHostDirectory(root, q({ kind: 'files', folder: 'escape' })), SearchPathError);
    await assert.rejects(searchHostDirectory(root, q({ kind: 'files', folder: '../outside' })), /inside the sandbox's workspace/);
  });

  it('refuses globs that are absolute or climb out with ..', () => {
    const params = companionMethods['sandboxes/search'].params;
    const ref = { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-1' };
    for (const glob of ['../outside/**', 'src/../../outside/*', '/etc/**', 'C:\\Windows\\*']) {
      const parsed = params.safeParse({ ref, query: { kind: 'text', pattern: 'x', includes: [glob] } });
      assert.equal(parsed.success, false, glob);
      assert.equal(params.safeParse({ ref, query: { kind: 'files', excludes: [glob] } }).success, false, glob);
    }
  });

  it('finds text: literal, case, whole word, regex, with columns and context lines', async () => {
    const literal = await searchHostDirectory(root, q({ kind: 'text', pattern: 'needle' }));
    assert.deepEqual(matchLines(literal), ['README.md:1', 'src/app/main.ts:2', 'src/app/main.ts:3', 'src/app/util.ts:1', 'src/app/util.ts:2', 'src/lib/deep/nested/widgetFactory.ts:3']);
    const main2 = literal.lines.find((l) => l.path === 'src/app/main.ts' && l.line === 2);
    assert.deepEqual(main2?.ranges, [{ start: 6, end: 12 }, { start: 21, end: 27 }]);
    const cased = await searchHostDirectory(root, q({ kind: 'text', pattern: 'Needle', isCaseSensitive: true }));
    assert.deepEqual(matchLines(cased), ['src/app/util.ts:2']);
    const word = await searchHostDirectory(root, q({ kind: 'text', pattern: 'needle', isWordMatch: true }));
    assert.ok(!matchLines(word).includes('src/app/util.ts:1'), 'needles is not the word needle');
    const regex = await searchHostDirectory(root, q({ kind: 'text', pattern: 'need(le)?\\s+here', isRegExp: true }));
    assert.deepEqual(matchLines(regex), ['src/lib/deep/nested/widgetFactory.ts:3']);
    const context = await searchHostDirectory(root, q({ kind: 'text', pattern: 'needle here', contextLines: 1 }));
    assert.deepEqual(
      context.lines.map((l) => `${l.line}${l.kind === 'match' ? ':' : '-'}${l.text}`),
      ['2-line two', '3:needle here', '4-line four'],
    );
    await assert.rejects(searchHostDirectory(root, q({ kind: 'text', pattern: '(unclosed', isRegExp: true })), /not a valid regular expression/);
  });

  it('applies include and exclude globs', async () => {
    const ts = await searchHostDirectory(root, q({ kind: 'text', pattern: 'needle', includes: ['**/*.ts'], excludes: ['src/lib'] }));
    assert.deepEqual([...new Set(ts.lines.map((l) => l.path))].sort(), ['src/app/main.ts', 'src/app/util.ts']);
    const byName = await searchHostDirectory(root, q({ kind: 'files', includes: ['*.md'] }));
    assert.deepEqual(byName.files, ['README.md']);
  });

  it('skips binary files and files over maxFileBytes, and counts them', async () => {
    const r = await searchHostDirectory(root, q({ kind: 'text', pattern: 'needle', maxFileBytes: 55 }));
    assert.ok(!r.lines.some((l) => l.path === 'image.bin'));
    assert.equal(r.stats.skippedBinary, 1);
    assert.equal(r.stats.skippedLarge, 1); // main.ts is 70 bytes, the others at most 50
    assert.ok(!r.lines.some((l) => l.path === 'src/app/main.ts'));
  });

  it('stops at maxResults and at maxTotalBytes, and says so', async () => {
    const few = await searchHostDirectory(root, q({ kind: 'text', pattern: 'needle', maxResults: 2 }));
    assert.equal(few.lines.filter((l) => l.kind === 'match').length, 2);
    assert.equal(few.stopped, 'results');
    assert.equal(few.limitHit, true);
    const bytes = await searchHostDirectory(root, q({ kind: 'text', pattern: 'needle', maxTotalBytes: 30 }));
    assert.equal(bytes.stopped, 'bytes');
    assert.ok(bytes.stats.bytesSearched <= 30);
    const files = await searchHostDirectory(root, q({ kind: 'files', maxResults: 1 }));
    assert.equal(files.files.length, 1);
    assert.equal(files.stopped, 'results');
  });

  it('says limitHit only when results were left out: exactly maxResults matches is not a hit', async () => {
    for (const avoidGrep of [false, true]) {
      const exact = await searchHostDirectory(root, q({ kind: 'text', pattern: 'needle', maxResults: 6 }), { avoidGrep });
      assert.equal(exact.lines.filter((l) => l.kind === 'match').length, 6);
      assert.equal(exact.limitHit, false, `6 matches, maxResults 6 (avoidGrep: ${avoidGrep})`);
      assert.equal(exact.stopped, undefined);
      const over = await searchHostDirectory(root, q({ kind: 'text', pattern: 'needle', maxResults: 5 }), { avoidGrep });
      assert.equal(over.lines.filter((l) => l.kind === 'match').length, 5);
      assert.equal(over.limitHit, true, `6 matches, maxResults 5 (avoidGrep: ${avoidGrep})`);
    }
    const files = await searchHostDirectory(root, q({ kind: 'files', maxResults: 5 }));
    assert.deepEqual([files.files.length, files.limitHit], [5, false]);
    const fewer = await searchHostDirectory(root, q({ kind: 'files', maxResults: 4 }));
    assert.deepEqual([fewer.files.length, fewer.limitHit], [4, true]);
  });

  it('with GNU grep picking the files, finds exactly what the in-process walk finds', async () => {
    assert.ok(await gnuGrepAvailable(), 'GNU grep and find are on this machine (else the in-process walk always runs)');
    write(root, 'src/big.txt', `${'filler line\n'.repeat(10)}NEEDLE big\n`);
    write(root, 'src/crlf.txt', 'first\r\nneedle with crlf\r\nlast\r\n');
    write(root, 'src/late-binary.dat', Buffer.concat([Buffer.from('text needle\n'), Buffer.alloc(10), Buffer.from('needle')]));
    write(root, 'src/utf8.txt', 'Grüße needle café\n');
    try {
      const queries: Extract<SearchQueryInput, { kind: 'text' }>[] = [
        { kind: 'text', pattern: 'needle' },
        { kind: 'text', pattern: 'NEEDLE', isCaseSensitive: true },
        { kind: 'text', pattern: 'needle', isWordMatch: true, contextLines: 2 },
        { kind: 'text', pattern: 'ne+dle\\s+(here|with)', isRegExp: true },
        { kind: 'text', pattern: 'Grüße needle', isCaseSensitive: false },
        { kind: 'text', pattern: 'needle', useDefaultExcludes: false, excludes: ['*.md'] },
        { kind: 'text', pattern: 'needle', includes: ['src/**'], maxFileBytes: 60 },
        { kind: 'text', pattern: 'needle', folder: 'src/app' },
        { kind: 'text', pattern: 'needle', maxTotalBytes: 120 },
      ];
      for (const input of queries) {
        const query = q(input);
        assert.ok(query.kind === 'text' && requiredLiteral(query) !== undefined, `grep is used for ${JSON.stringify(input)}`);
        const viaGrep = await searchHostDirectory(root, query);
        const inProcess = await searchHostDirectory(root, query, { avoidGrep: true });
        const key = (r: SearchResult) => r.lines.map((l) => JSON.stringify(l)).sort();
        assert.equal(viaGrep.stopped, inProcess.stopped, JSON.stringify(input));
        if (input.maxTotalBytes !== undefined) {
          // Which files fit the budget depends on the walk's order (each walk's own): both stop within it.
          assert.ok(viaGrep.stats.bytesSearched <= input.maxTotalBytes && inProcess.stats.bytesSearched <= input.maxTotalBytes);
          continue;
        }
        assert.deepEqual(key(viaGrep), key(inProcess), JSON.stringify(input));
        const { durationMs: _a, skippedBinary: _b, ...grepStats } = viaGrep.stats;
        const { durationMs: _c, skippedBinary: _d, ...walkStats } = inProcess.stats;
        assert.deepEqual(grepStats, walkStats, JSON.stringify(input));
      }
    } finally {
      for (const f of ['src/big.txt', 'src/crlf.txt', 'src/late-binary.dat', 'src/utf8.txt']) fs.rmSync(path.join(root, f));
    }
  });

  it('finds a literal every match must contain, or none when it cannot be sure', () => {
    const lit = (pattern: string, isRegExp = true) => requiredLiteral({ pattern, isRegExp });
    assert.equal(lit('quixotic_\\w+_42'), 'quixotic_');
    assert.equal(lit('foo(bar|baz)+qux'), 'foo');
    assert.equal(lit('abcx?yz'), 'abc', 'a character that may be absent ends the literal');
    assert.equal(lit('a\\.b\\.cde'), 'a.b.cde');
    assert.equal(lit('[xyz]hello{2}'), 'hello');
    assert.equal(lit('one|twotwo'), undefined, 'an alternative at the top');
    assert.equal(lit('\\x41BCD'), undefined, 'an escape not followed');
    assert.equal(lit('Grüße needle', false), 'e needle', 'ASCII only');
    assert.equal(lit('a\nb', false), undefined, 'a line break never matches');
    assert.equal(lit('x', false), undefined, 'too short to be worth it');
  });

  it('stops at its time limit even when the tree never answers', async () => {
    const stuck: TreeSource = {
      list: (_rel, signal) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true })),
      read: () => Promise.reject(new Error('not reached')),
    };
    const run = new SearchRun(q({ kind: 'files', timeoutMs: 100 }), undefined, undefined);
    await searchTree(stuck, '', run, { concurrency: 4 });
    const result = run.finish('host');
    assert.equal(result.stopped, 'time');
  });

  it('streams results in batches, keeps none for the response, and stops streaming on cancel', async () => {
    const many = path.join(work, 'many');
    for (let i = 0; i < 300; i++) write(many, `d${i % 10}/f${i}.txt`, `alpha\nneedle ${i}\n`);
    const partials: SearchPartial[] = [];
    const streamed = await searchHostDirectory(many, q({ kind: 'text', pattern: 'needle' }), { onPartial: (p) => partials.push(p) });
    assert.equal(streamed.lines.length, 0);
    assert.equal(partials.flatMap((p) => p.lines ?? []).length, 300);
    assert.ok(partials.length > 1, 'more than one batch');

    const controller = new AbortController();
    let after = 0;
    const cancelled = searchHostDirectory(many, q({ kind: 'text', pattern: 'needle' }), {
      signal: controller.signal,
      onPartial: () => {
        if (controller.signal.aborted) after++;
        controller.abort();
      },
    });
    await assert.rejects(cancelled, (err: Error) => err.name === 'AbortError');
    assert.equal(after, 0, 'no batch after the cancel');
  });

  it('sends the first result as soon as it is found, then batches the rest per turn of the event loop', async () => {
    const sent: SearchPartial[] = [];
    const run = new SearchRun(q({ kind: 'text', pattern: 'needle' }), (p) => sent.push(p), undefined);
    const line = (path: string): SearchLine => ({ path, line: 1, kind: 'match', text: 'needle', textOffset: 0, ranges: [{ start: 0, end: 6 }] });
    try {
      run.addLines([line('a.ts')], 1);
      await Promise.resolve();
      assert.equal(sent.length, 1, 'the first result left before the event loop turned');
      run.addLines([line('b.ts')], 1);
      run.addLines([line('c.ts')], 1);
      await Promise.resolve();
      assert.equal(sent.length, 1, 'later results wait for the batch');
      await new Promise<void>((resolve) => setImmediate(resolve));
      assert.deepEqual(
        sent.map((p) => (p.lines ?? []).map((l) => l.path)),
        [['a.ts'], ['b.ts', 'c.ts']],
      );
    } finally {
      run.finish('host');
    }
  });

  it('decides on a file grep names before the listing reached it as soon as the listing passes it', async () => {
    const query = q({ kind: 'text', pattern: 'needle', includes: ['src/**'], maxFileBytes: 100 }) as TextSearchQuery;
    const run = new SearchRun(query, undefined, undefined);
    const listing = new Listing('', createSearchFilter(query), query, run);
    const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
    try {
      let decided = false;
      void listing.reached('src/b.ts').then(() => (decided = true));
      listing.onFile(10, 'src/a.ts');
      await turn();
      assert.equal(decided, false, 'still waiting: the listing has not reached it');
      listing.onFile(20, 'src/b.ts');
      await turn();
      assert.equal(decided, true, 'decided while the listing goes on, not when it ends');
      assert.ok(listing.accepted.has('src/b.ts'));
      // Listed earlier and left out for its size: nothing to wait for.
      listing.onFile(500, 'src/big.ts');
      let big = false;
      void listing.reached('src/big.ts').then(() => (big = true));
      await turn();
      assert.equal(big, true);
      assert.ok(!listing.accepted.has('src/big.ts'));
      assert.equal(listing.pathPasses('docs/readme.md'), false, 'the filter alone rules it out (the caller does not wait)');
      // Never listed (a file that appeared after find passed its folder): released when the listing ends.
      let gone = false;
      void listing.reached('src/new.ts').then(() => (gone = true));
      await turn();
      assert.equal(gone, false);
      listing.end();
      await turn();
      assert.equal(gone, true);
      assert.deepEqual([run.stats.filesSearched, run.stats.bytesSearched, run.stats.skippedLarge], [2, 30, 1]);
    } finally {
      run.dispose();
    }
  });

  it('handles a listing of many slices to its end, every file counted once', async () => {
    const wide = path.join(work, 'wide');
    // Short names: find's 4 KiB blocks hold more records than one slice handles.
    for (let i = 0; i < 1500; i++) write(wide, `d${i % 7}/${i}`, i % 3 === 0 ? `x\nneedle ${i}\n` : 'nothing here\n');
    const query = q({ kind: 'text', pattern: 'needle' });
    const viaGrep = await searchHostDirectory(wide, query);
    const inProcess = await searchHostDirectory(wide, query, { avoidGrep: true });
    assert.equal(viaGrep.lines.length, 500);
    const { durationMs: _a, ...grepStats } = viaGrep.stats;
    const { durationMs: _b, ...walkStats } = inProcess.stats;
    assert.deepEqual(grepStats, walkStats);
    assert.equal(grepStats.filesSearched, 1500);
  });
});
