// Tasks of type `sandbox`: a command line run in a sandbox, in a terminal of its own (SandboxTaskTerminal). The ones in
// tasks.json are resolved here; and Run Task offers, as VS Code's npm extension does for a local folder, the scripts of
// the `package.json` at the root of each sandbox this window shows (its sandbox folders, and the sandbox of the active
// editor) — run with the package manager its lock file names (npm, pnpm, yarn or bun). The npm extension itself sees
// only `file:` folders, so without this a sandbox folder's scripts were nowhere in Run Task.
import * as vscode from 'vscode';
import { z } from 'zod';
import { shellQuote } from '../../protocol/shellQuote';
import { SANDBOX_SCHEME, sandboxUri } from '../fs/sandboxFileSystemProvider';
import { activeSandboxKey } from '../sandboxes/activeSandbox';
import type { SandboxRegistry } from '../sandboxes/registry';
import { SandboxTaskTerminal, type TerminalFactoryDeps } from '../terminal/sandboxPseudoterminal';

export const SANDBOX_TASK_TYPE = 'sandbox';

interface SandboxTaskDefinition extends vscode.TaskDefinition {
  type: typeof SANDBOX_TASK_TYPE;
  command: string;
  sandbox?: string;
  cwd?: string;
}

const PackageScriptsSchema = z.object({ scripts: z.record(z.string(), z.string()).optional() });

/** Lock file → the command that runs a script with that package manager. */
const RUNNERS: readonly (readonly [lockFile: string, run: string])[] = [
  ['pnpm-lock.yaml', 'pnpm run'],
  ['yarn.lock', 'yarn run'],
  ['bun.lock', 'bun run'],
  ['bun.lockb', 'bun run'],
];

/** The sandboxes whose scripts Run Task offers: this window's sandbox folders and the active editor's sandbox. */
function shownSandboxes(): { key: string; scope: vscode.WorkspaceFolder | vscode.TaskScope.Workspace }[] {
  const out = new Map<string, vscode.WorkspaceFolder | vscode.TaskScope.Workspace>();
  for (const folder of vscode.workspace.workspaceFolders ?? []) if (folder.uri.scheme === SANDBOX_SCHEME) out.set(folder.uri.authority, folder);
  const active = activeSandboxKey();
  if (active !== undefined && !out.has(active)) out.set(active, vscode.TaskScope.Workspace);
  return [...out].map(([key, scope]) => ({ key, scope }));
}

export class SandboxTaskProvider implements vscode.TaskProvider {
  constructor(
    private readonly registry: SandboxRegistry,
    private readonly terminals: TerminalFactoryDeps,
    private readonly log: vscode.LogOutputChannel,
  ) {}

  async provideTasks(token: vscode.CancellationToken): Promise<vscode.Task[]> {
    const tasks: vscode.Task[] = [];
    for (const { key, scope } of shownSandboxes()) {
      if (token.isCancellationRequested) break;
      if (this.registry.summary(key)?.phase !== 'Ready') continue;
      tasks.push(...(await this.scriptTasks(key, scope)));
    }
    return tasks;
  }

  /** A task of tasks.json: VS Code wants its very definition back, with an execution. */
  resolveTask(task: vscode.Task): vscode.Task | undefined {
    const d = task.definition as Record<string, unknown>;
    if (typeof d.command !== 'string') return undefined;
    const run = { command: d.command, sandbox: typeof d.sandbox === 'string' ? d.sandbox : undefined, cwd: typeof d.cwd === 'string' ? d.cwd : undefined };
    return this.task(task.definition, run, task.scope ?? vscode.TaskScope.Workspace, task.name);
  }

  /** The scripts of the sandbox's root package.json, as tasks; none when it has no (readable) one. */
  private async scriptTasks(key: string, scope: vscode.WorkspaceFolder | vscode.TaskScope.Workspace): Promise<vscode.Task[]> {
    let scripts: Record<string, string>;
    let names: Set<string>;
    try {
      const [text, listing] = await Promise.all([vscode.workspace.fs.readFile(sandboxUri(key, 'package.json')), vscode.workspace.fs.readDirectory(sandboxUri(key))]);
      scripts = PackageScriptsSchema.parse(JSON.parse(new TextDecoder().decode(text))).scripts ?? {};
      names = new Set(listing.map(([name]) => name));
    } catch (err) {
      if (!(err instanceof vscode.FileSystemError && err.code === 'FileNotFound')) this.log.info(`no scripts of ${key} for Run Task: ${err instanceof Error ? err.message : String(err)}`);
      return [];
    }
    const run = RUNNERS.find(([lockFile]) => names.has(lockFile))?.[1] ?? 'npm run';
    return Object.entries(scripts).map(([script, body]) => {
      const definition: SandboxTaskDefinition = { type: SANDBOX_TASK_TYPE, command: `${run} ${shellQuote(script)}`, sandbox: key };
      const task = this.task(definition, definition, scope, `${run} ${script}`);
      task.detail = body;
      if (script === 'build') task.group = vscode.TaskGroup.Build;
      else if (script === 'test') task.group = vscode.TaskGroup.Test;
      return task;
    });
  }

  private task(
    definition: vscode.TaskDefinition,
    { command, sandbox, cwd }: { command: string; sandbox?: string | undefined; cwd?: string | undefined },
    scope: vscode.WorkspaceFolder | vscode.TaskScope,
    name: string,
  ): vscode.Task {
    return new vscode.Task(
      definition,
      scope,
      name,
      SANDBOX_TASK_TYPE,
      new vscode.CustomExecution(async () => {
        const key = sandbox ?? activeSandboxKey();
        const connection = key ? this.registry.connection(key) : undefined;
        if (!connection) throw new Error('The task names no sandbox and no sandbox folder is open.');
        return new SandboxTaskTerminal(connection, command, cwd, (dir) => this.terminals.onCommandFinished(connection.key, dir), this.terminals.commands);
      }),
    );
  }
}
