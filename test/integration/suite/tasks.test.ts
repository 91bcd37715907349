// Run Task offers the scripts of a sandbox's package.json (extension/tasks/sandboxTasks.ts), as VS Code's npm
// extension does for a local folder — which sees only `file:` folders: run in the sandbox, with the package manager
// its lock file names.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { newLocalSandbox, until } from './helpers';

describe('Run Task: the scripts of a sandbox\'s package.json', () => {
  let sandbox: SandboxSummary;
  const uri = (p: string) => vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: `/${p}` });
  const write = (p: string, text: string) => vscode.workspace.fs.writeFile(uri(p), new TextEncoder().encode(text));
  const ours = async () => (await vscode.tasks.fetchTasks({ type: 'sandbox' })).filter((t) => (t.definition as { sandbox?: string }).sandbox === sandbox.key);

  before(async function () {
    this.timeout(60_000);
    sandbox = await newLocalSandbox();
    await write('package.json', JSON.stringify({ name: 'demo', scripts: { build: 'echo built-ok > built.txt', 'say hi': "echo 'hi there'", test: 'exit 3' } }));
    // The sandbox of the active editor is one Run Task looks at (so are sandbox folders).
    await vscode.window.showTextDocument(uri('package.json'));
  });
  after(async () => {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  });

  it('offers each script as a task in the sandbox, build and test in their groups, the script as its detail', async () => {
    const tasks = await ours();
    assert.deepEqual(tasks.map((t) => t.name).sort(), ['npm run build', 'npm run say hi', 'npm run test']);
    const build = tasks.find((t) => t.name === 'npm run build');
    assert.equal(build?.group?.id, vscode.TaskGroup.Build.id);
    assert.equal(tasks.find((t) => t.name === 'npm run test')?.group?.id, vscode.TaskGroup.Test.id);
    assert.equal(build?.detail, 'echo built-ok > built.txt');
    assert.equal(tasks.find((t) => t.name === 'npm run say hi')?.definition.command, "npm run 'say hi'");
  });

  it('runs a script in the sandbox', async function () {
    this.timeout(60_000);
    const build = (await ours()).find((t) => t.name === 'npm run build');
    assert.ok(build);
    const ended = new Promise<number | undefined>((resolve) => {
      const sub = vscode.tasks.onDidEndTaskProcess((e) => {
        if (e.execution.task.name === 'npm run build') {
          sub.dispose();
          resolve(e.exitCode);
        }
      });
    });
    await vscode.tasks.executeTask(build);
    assert.equal(await ended, 0);
    assert.equal(new TextDecoder().decode(await vscode.workspace.fs.readFile(uri('built.txt'))), 'built-ok\n');
  });

  it('uses the package manager its lock file names; a sandbox without package.json offers none', async function () {
    this.timeout(60_000);
    await write('pnpm-lock.yaml', 'lockfileVersion: 9.0\n');
    await until(async () => (await ours()).some((t) => t.name === 'pnpm run build'), 'pnpm run build to be offered');
    assert.equal((await ours()).find((t) => t.name === 'pnpm run say hi')?.definition.command, "pnpm run 'say hi'");
    await vscode.workspace.fs.delete(uri('package.json'));
    await until(async () => (await ours()).length === 0, 'no tasks once package.json is gone');
  });
});
