// Check This Machine: `sandbox-sessions doctor --json`, run as the companion server would be (same Node, same
// kubeconfig, same state directory), its checks shown in a list a person can read at a glance — what works, what
// does not and why (bubblewrap missing, no cluster, an unwritable state directory). The walkthrough's first step
// and Export Support Report run the same doctor.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import * as vscode from 'vscode';
import { z } from 'zod';
import { serverCommand, serverEnvironment } from '../companion/companionClient';

const DOCTOR_TIMEOUT_MS = 60_000;

const DoctorReportSchema = z.object({
  checks: z.array(z.object({ name: z.string(), ok: z.boolean(), detail: z.string() })),
});
export type DoctorReport = z.infer<typeof DoctorReportSchema>;

/** Runs the doctor; rejects when it cannot run at all (a report with failed checks is still a report). */
export async function runDoctor(context: vscode.ExtensionContext): Promise<DoctorReport> {
  const { command, args } = serverCommand(context, ['doctor', '--json']);
  // The server's environment for the kubeconfig and the Node; not the repository's location (it may hold a password).
  const env: NodeJS.ProcessEnv = { ...(await serverEnvironment(context)), ELECTRON_RUN_AS_NODE: '1' };
  delete env.SANDBOX_SESSIONS_REPOSITORY;
  const { stdout } = await promisify(execFile)(command, args, { env, timeout: DOCTOR_TIMEOUT_MS, maxBuffer: 4 * 1024 * 1024 }).catch(
    // The doctor exits non-zero when a check fails; its report is still on stdout.
    (err: { stdout?: string; message: string }) => {
      if (typeof err.stdout === 'string' && err.stdout.trim() !== '') return { stdout: err.stdout };
      throw err;
    },
  );
  return DoctorReportSchema.parse(JSON.parse(stdout));
}

/** The command: the doctor's checks in a list (failed ones first); resolves with the report and what the list shows. */
export function registerCheckMachine(context: vscode.ExtensionContext): vscode.Disposable {
  return vscode.commands.registerCommand('sandboxSessions.checkMachine', async () => {
    let report: DoctorReport;
    try {
      report = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'Checking this machine…' }, () => runDoctor(context));
    } catch (err) {
      void vscode.window.showErrorMessage(`The doctor could not run: ${(err as Error).message}`, 'Show Logs').then((c) => c && vscode.commands.executeCommand('sandboxSessions.showLogs'));
      return undefined;
    }
    const failed = report.checks.filter((c) => !c.ok).length;
    const pick = vscode.window.createQuickPick();
    pick.title = failed === 0 ? `All ${report.checks.length} checks passed` : `${failed} of ${report.checks.length} checks failed`;
    pick.placeholder = 'What this machine can run: each check as `sandbox-sessions doctor` reports it';
    pick.matchOnDetail = true;
    pick.items = [...report.checks]
      .sort((a, b) => Number(a.ok) - Number(b.ok))
      .map((c) => ({ label: `${c.ok ? '$(pass)' : '$(error)'} ${c.name}`, detail: c.detail }));
    pick.onDidHide(() => pick.dispose());
    pick.show();
    return { report, title: pick.title, items: pick.items.map((i) => i.label) };
  });
}
