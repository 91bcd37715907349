// Shared helpers of the integration suite (runs inside the real extension host).
import fs from 'node:fs';
import path from 'node:path';
import * as vscode from 'vscode';
import type { SandboxSessionsApi } from '../../../extension/extension';
import type { SandboxSummary } from '../../../protocol/sandboxes';

export const EXTENSION_ID = 'sandbox-sessions.sandbox-sessions';

export async function api(): Promise<SandboxSessionsApi> {
  const extension = vscode.extensions.getExtension<SandboxSessionsApi | undefined>(EXTENSION_ID);
  if (!extension) throw new Error(`${EXTENSION_ID} is not loaded`);
  const exported = await extension.activate();
  if (!exported) throw new Error('the extension did not start its companion server (see the Sandbox Sessions log)');
  return exported;
}

/** Creates a Ready local sandbox through the extension's own command (no folder is opened). */
export async function newLocalSandbox(): Promise<SandboxSummary> {
  const created = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.newSandbox', {
    provider: 'local',
    runtime: 'process',
    open: false,
  });
  if (!created) throw new Error('sandboxSessions.newSandbox returned nothing');
  return created;
}

/** Resolves with `terminal` once VS Code has closed it (its exit status set). */
export function whenClosed(terminal: vscode.Terminal): Promise<vscode.Terminal> {
  return new Promise((resolve) => {
    const sub = vscode.window.onDidCloseTerminal((t) => {
      if (t === terminal) {
        sub.dispose();
        resolve(t);
      }
    });
  });
}

export async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Removes VT escape sequences so terminal text can be matched. */
export function plain(text: string): string {
  // eslint-disable-next-line no-control-regex -- terminal output is control sequences
  return text.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').replace(/\x1b\][^\x07]*\x07/g, ''); // CSI, and OSC (shell integration)
}

/**
 * The Runtime access API requests a local sandbox has served, counted by the local gateway
 * itself (its state file names the port and token; the suite runs as the same user).
 */
export async function gatewayRequests(name: string, namespace = 'default'): Promise<Record<string, number>> {
  const stateDir = process.env.SANDBOX_SESSIONS_STATE_DIR;
  if (!stateDir) throw new Error('SANDBOX_SESSIONS_STATE_DIR is not set for the extension host');
  const state = JSON.parse(fs.readFileSync(path.join(stateDir, 'gateway.json'), 'utf8')) as { url: string; token: string };
  const res = await fetch(`${state.url}/local/v1/namespaces/${namespace}/runs/${name}/requests`, { headers: { authorization: `Bearer ${state.token}` } });
  if (!res.ok) throw new Error(`requests: HTTP ${res.status}`);
  return ((await res.json()) as { requests: Record<string, number> }).requests;
}

/**
 * Writes a one-task tasks.json (`type: sandbox`) into the suite's local folder and waits until VS Code offers it.
 * Returns the task and a promise of its exit code, listening before anything runs.
 */
export async function sandboxTask(label: string, command: string, sandboxKey: string): Promise<{ task: vscode.Task; exitCode: Promise<number | undefined> }> {
  const folder = vscode.workspace.workspaceFolders?.[0];
  if (!folder || folder.uri.scheme !== 'file') throw new Error('the suite runs with a local folder open');
  fs.mkdirSync(path.join(folder.uri.fsPath, '.vscode'), { recursive: true });
  fs.writeFileSync(path.join(folder.uri.fsPath, '.vscode', 'tasks.json'), JSON.stringify({ version: '2.0.0', tasks: [{ type: 'sandbox', label, command, sandbox: sandboxKey }] }));
  let task: vscode.Task | undefined;
  await until(async () => {
    task = (await vscode.tasks.fetchTasks({ type: 'sandbox' })).find((t) => t.name === label);
    return task !== undefined;
  }, 'the task from tasks.json');
  const exitCode = new Promise<number | undefined>((resolve) => {
    const sub = vscode.tasks.onDidEndTaskProcess((e) => {
      if (e.execution.task.name === label) {
        sub.dispose();
        resolve(e.exitCode);
      }
    });
  });
  return { task: task as vscode.Task, exitCode };
}

type MenuEntry = { command: string; when?: string };

/**
 * The commands a tree item's context menu shows in `view`: package.json's `view/item/context` entries whose
 * `when` holds for that item. Evaluates the clauses these menus use (`view == …`, `viewItem == …`,
 * `viewItem =~ /…/`, joined by `&&`) and throws on any other, so a menu this cannot read never passes unread.
 */
export function contextMenu(view: string, contextValue: string | undefined): string[] {
  const extension = vscode.extensions.getExtension(EXTENSION_ID);
  const menus = (extension?.packageJSON as { contributes: { menus: Record<string, MenuEntry[]> } }).contributes.menus;
  const holds = (clause: string): boolean => {
    const m = /^(view|viewItem) (==|=~) (.+)$/.exec(clause.trim());
    const [, key, op, operand = ''] = m ?? [];
    const re = /^\/(.*)\/$/.exec(operand)?.[1];
    if (!m || (op === '=~' && re === undefined)) throw new Error(`contextMenu cannot evaluate "${clause}"`);
    const value = key === 'view' ? view : (contextValue ?? '');
    return op === '==' ? value === operand : new RegExp(re ?? '').test(value);
  };
  return (menus['view/item/context'] ?? []).filter((e) => (e.when ?? '').split('&&').every(holds)).map((e) => e.command);
}
