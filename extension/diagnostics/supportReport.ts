// Export Support Report…: one Markdown file that a person reads before they share it — the versions, the doctor's
// checks (state directory, gateway daemon, kruntimes, each sandbox backend probed for real), the providers, the
// sandboxes this window knows with their file system counters (a stat storm shows there), and the extension's log,
// the companion server's lines included. Nothing in it is a secret (nothing logs one); what a quoted message might
// still carry is masked (maskSecrets.ts). It is opened in an editor once written, so the person sees what it says.
import os from 'node:os';
import * as vscode from 'vscode';
import type { CompanionClient } from '../companion/companionClient';
import type { LiveSandboxChanges } from '../fs/liveSandboxChanges';
import type { SandboxFileSystemProvider } from '../fs/sandboxFileSystemProvider';
import type { SandboxRegistry } from '../sandboxes/registry';
import { runDoctor } from './doctor';
import { maskSecrets } from './maskSecrets';

/** The last lines of each log file that go into the report. */
const LOG_LINES = 1_000;

export interface SupportReportDeps {
  context: vscode.ExtensionContext;
  companion: CompanionClient;
  registry: SandboxRegistry;
  fileSystem: SandboxFileSystemProvider;
  live: LiveSandboxChanges;
  /** The gateway round trips the status bar measured of a sandbox (median, count), if it did. */
  roundTrip(key: string): { medianMs: number; count: number } | undefined;
}

/** The report's Markdown. Each part that cannot be gathered says why, and the rest still comes. */
export async function supportReport(deps: SupportReportDeps): Promise<string> {
  const { context } = deps;
  const sections = await Promise.all([doctorSection(context), providersSection(deps), sandboxesSection(deps), logSection(context.logUri)]);
  const header = [
    '# Sandbox Sessions support report',
    '',
    `- Written: ${new Date().toISOString()}`,
    `- Sandbox Sessions ${String(context.extension.packageJSON.version)} in ${vscode.env.appName} ${vscode.version} (${vscode.env.uiKind === vscode.UIKind.Web ? 'web' : 'desktop'}${vscode.env.remoteName ? `, remote ${vscode.env.remoteName}` : ''})`,
    `- ${os.type()} ${os.release()} ${process.arch}; extension host Node ${process.versions.node}`,
    '',
    'Read it before you share it: it names paths, sandboxes and kubeconfig contexts of this machine.',
  ];
  return maskSecrets([...header, ...sections.flat()].join('\n') + '\n');
}

/** The doctor's checks (doctor.ts), one line each. */
async function doctorSection(context: vscode.ExtensionContext): Promise<string[]> {
  const lines = ['', '## Doctor', ''];
  try {
    const report = await runDoctor(context);
    for (const c of report.checks) lines.push(`- ${c.ok ? 'ok' : 'FAILED'} — ${c.name}: ${c.detail}`);
  } catch (err) {
    lines.push(`The doctor could not run: ${(err as Error).message}`);
  }
  return lines;
}

async function providersSection({ companion }: SupportReportDeps): Promise<string[]> {
  const lines = ['', '## Providers', ''];
  try {
    const { providers } = await companion.request('providers/list', {});
    for (const p of providers) {
      lines.push(`- ${p.label} (${p.kind}): ${p.available ? 'available' : `not available — ${p.reason ?? 'no reason given'}`}`);
      for (const c of p.contexts) lines.push(`  - context ${c.name}${c.current ? ' (current)' : ''}: namespaces ${c.namespaces.join(', ') || 'none'}`);
      for (const r of p.runtimes ?? []) lines.push(`  - runtime ${r.name}: ${r.available ? 'available' : `not available — ${r.reason ?? ''}`} (${r.isolation})`);
    }
  } catch (err) {
    lines.push(`The companion server did not answer: ${(err as Error).message}`);
  }
  return lines;
}

function sandboxesSection({ registry, fileSystem, live, roundTrip }: SupportReportDeps): string[] {
  const lines = ['', '## Sandboxes this window knows', ''];
  const followed = new Set(live.followed());
  const summaries = registry.all();
  if (summaries.length === 0) lines.push('None.');
  for (const s of summaries) {
    const counters = fileSystem.countersOf(s.key);
    const files = counters ? `; file system calls: listing pages ${counters.listPages}, reads ${counters.reads}, changes ${counters.mutations}` : '';
    const trip = roundTrip(s.key);
    const latency = trip ? `; gateway round trip ${trip.medianMs} ms (median of ${trip.count})` : '';
    lines.push(`- ${s.key}: ${s.phase ?? 'unknown phase'}${s.message ? ` (${s.message})` : ''}${followed.has(s.key) ? '; live changes followed' : ''}${files}${latency}`);
  }
  const shown = (vscode.workspace.workspaceFolders ?? []).map((f) => `${f.name} = ${f.uri.scheme === 'file' ? 'a local folder' : f.uri.toString()}`);
  lines.push('', `Workspace folders: ${shown.length === 0 ? 'none' : shown.join('; ')}`);
  return lines;
}

/** The extension's log files (the companion server's lines are in them), each to its last LOG_LINES lines. */
async function logSection(logDir: vscode.Uri): Promise<string[]> {
  const lines = ['', '## Log', ''];
  try {
    const names = (await vscode.workspace.fs.readDirectory(logDir)).filter(([n, t]) => t === vscode.FileType.File && n.endsWith('.log')).map(([n]) => n);
    if (names.length === 0) lines.push('No log file yet.');
    for (const name of names.sort()) {
      const text = new TextDecoder().decode(await vscode.workspace.fs.readFile(vscode.Uri.joinPath(logDir, name)));
      const all = text.split('\n');
      lines.push(`### ${name}${all.length > LOG_LINES ? ` (its last ${LOG_LINES} lines)` : ''}`, '', '```', ...all.slice(-LOG_LINES), '```', '');
    }
  } catch (err) {
    lines.push(`The log could not be read: ${(err as Error).message}`);
  }
  return lines;
}

/** The command: writes the report where the person chooses (or to `target`) and opens it. */
export function registerSupportReport(deps: SupportReportDeps): vscode.Disposable {
  return vscode.commands.registerCommand('sandboxSessions.exportSupportReport', async (target?: vscode.Uri) => {
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const file =
      target ??
      (await vscode.window.showSaveDialog({
        title: 'Export Support Report',
        defaultUri: vscode.Uri.file(`${os.homedir()}/sandbox-sessions-support-${stamp}.md`),
        filters: { Markdown: ['md'] },
        saveLabel: 'Export',
      }));
    if (!file) return undefined;
    const report = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'Gathering a support report…' }, () => supportReport(deps));
    await vscode.workspace.fs.writeFile(file, new TextEncoder().encode(report));
    await vscode.window.showTextDocument(file, { preview: false });
    return file;
  });
}
