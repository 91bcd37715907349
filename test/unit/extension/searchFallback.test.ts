// The fallback search commands' logic (Go to File in Sandbox…, Find in Sandbox…) without an
// editor: fuzzy ranking of paths, what the typed text means, and results grouped by file.
import assert from 'node:assert/strict';
import { groupByFile, parseFindInput, rankPaths } from '../../../extension/search/findResults';
import { SandboxFileIndex } from '../../../extension/search/fileIndex';
import { fuzzyMatches } from '../../../extension/search/fuzzyMatch';
import type { SearchLine } from '../../../protocol/search';

describe('sandbox search fallback (Go to File / Find in Sandbox)', () => {
  const paths = ['src/app/main.ts', 'src/lib/deep/nested/widgetFactory.ts', 'docs/widget-factory-notes.md', 'test/fixtures/wfac.txt', 'README.md'];

  it('ranks a fuzzy name: file-name matches and word starts first; non-matches left out', () => {
    assert.deepEqual(rankPaths(paths, 'wdgfac', 10).sort(), ['docs/widget-factory-notes.md', 'src/lib/deep/nested/widgetFactory.ts']);
    assert.deepEqual(rankPaths(['widget/readme.md', 'docs/widget.md'], 'widget', 10), ['docs/widget.md', 'widget/readme.md'], 'a match in the file name first');
    assert.equal(rankPaths(paths, 'wfac', 10)[0], 'test/fixtures/wfac.txt');
    assert.deepEqual(rankPaths(paths, 'zzz', 10), []);
    assert.equal(rankPaths(paths, '', 2).length, 2);
    assert.ok(fuzzyMatches('src/lib/deep/nested/widgetFactory.ts', 'nested widget'), 'pieces separated by spaces');
    assert.ok(fuzzyMatches('src/lib/deep/nested/widgetFactory.ts', 'lib\\deep'), 'a backslash is a folder separator');
    assert.ok(!fuzzyMatches('src/app/main.ts', 'mainx'));
  });

  it('reads /re/ as a regular expression and plain text with smart case', () => {
    assert.deepEqual(parseFindInput('needle'), { pattern: 'needle', isRegExp: false, isCaseSensitive: false });
    assert.deepEqual(parseFindInput('Needle'), { pattern: 'Needle', isRegExp: false, isCaseSensitive: true });
    assert.deepEqual(parseFindInput('/ne+dle/'), { pattern: 'ne+dle', isRegExp: true, isCaseSensitive: true });
    assert.deepEqual(parseFindInput('/ne+dle/i'), { pattern: 'ne+dle', isRegExp: true, isCaseSensitive: false });
  });

  it('groups matches by file in the order found, leaving context lines out', () => {
    const line = (path: string, n: number, kind: SearchLine['kind'] = 'match'): SearchLine => ({ path, line: n, kind, text: 't', textOffset: 0, ranges: [] });
    const groups = groupByFile([line('b.ts', 3), line('a.ts', 1), line('b.ts', 2, 'context'), line('b.ts', 9)]);
    assert.deepEqual([...groups.keys()], ['b.ts', 'a.ts']);
    assert.deepEqual(groups.get('b.ts')?.map((l) => l.line), [3, 9]);
  });

  it('Go to File keeps one listing per folder until a file is created or deleted in that sandbox', async () => {
    const index = new SandboxFileIndex();
    let listings = 0;
    let tree = ['a.ts'];
    const list = async () => {
      listings++;
      return [...tree];
    };
    const [first, second] = await Promise.all([index.filesOf('sandbox://s1/', 's1', list), index.filesOf('sandbox://s1/', 's1', list)]);
    assert.deepEqual([first, second, listings], [['a.ts'], ['a.ts'], 1], 'two quick opens share one listing');
    tree = ['a.ts', 'b.ts'];
    index.onChanges([{ authority: 's1', kind: 'changed' }, { authority: 's2', kind: 'created' }]);
    assert.deepEqual(await index.filesOf('sandbox://s1/', 's1', list), ['a.ts'], 'a change of contents, or another sandbox, keeps it');
    index.onChanges([{ authority: 's1', kind: 'created' }]);
    assert.deepEqual(await index.filesOf('sandbox://s1/', 's1', list), ['a.ts', 'b.ts'], 'a created file: listed again');
    tree = ['b.ts'];
    index.onChanges([{ authority: 's1', kind: 'deleted' }]);
    assert.deepEqual(await index.filesOf('sandbox://s1/', 's1', list), ['b.ts'], 'a deleted file: listed again');
    assert.equal(listings, 3);
    await assert.rejects(index.filesOf('sandbox://s3/', 's3', () => Promise.reject(new Error('gateway down'))), /gateway down/);
    assert.deepEqual(await index.filesOf('sandbox://s3/', 's3', list), ['b.ts'], 'a failed listing is not kept');
  });
});
