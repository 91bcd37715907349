// workspace.findFiles on a sandbox folder: VS Code asks the file search provider without a Quick Open session (so
// does any extension that looks for files), and the provider answers it — it used to throw "Invalid value used as
// weak map key" there, since it cached listings by a session that such searches do not have.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { newLocalSandbox } from './helpers';

describe('findFiles in a sandbox folder (the file search provider without a session)', () => {
  it('lists the files a glob matches, twice the same (no cache without a session)', async function () {
    this.timeout(60_000);
    const sandbox = await newLocalSandbox();
    const uri = (p: string) => vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: p });
    for (const p of ['/src/a.ts', '/src/deep/b.ts', '/README.md']) await vscode.workspace.fs.writeFile(uri(p), new TextEncoder().encode('x'));
    const find = async () => (await vscode.workspace.findFiles(new vscode.RelativePattern(uri('/'), 'src/**/*.ts'))).map((u) => u.toString()).sort();
    const expected = [uri('/src/a.ts').toString(), uri('/src/deep/b.ts').toString()].sort();
    assert.deepEqual(await find(), expected);
    await vscode.workspace.fs.writeFile(uri('/src/c.ts'), new TextEncoder().encode('x'));
    assert.deepEqual(await find(), [...expected, uri('/src/c.ts').toString()].sort(), 'a second search sees the new file');
  });
});
