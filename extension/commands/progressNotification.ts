// Long work under a progress notification with a working Cancel, for every command of this
// extension. The notification ends with its work: VS Code keeps a progress notification on screen
// for at least 800 ms after it was started (progressService: Promise.all([timeout(800), work])),
// so a short piece of work (a Drain, a download) used to finish, and its "done" message appear,
// under a notification that still showed the work with a Cancel button. The promise returned here
// settles only once VS Code has taken the progress notification away, so whatever the caller
// shows next (the result, an error) never appears beside a progress that is over.
import * as vscode from 'vscode';

/** How long VS Code keeps a progress notification at least (its progressService). */
export const VSCODE_MIN_PROGRESS_MS = 800;
/** The time the workbench (another process: a browser, for code-server) needs to hear that the work ended. */
const WORKBENCH_LAG_MS = 150;

export type ProgressWork<T> = (report: (message: string) => void, token: vscode.CancellationToken) => Promise<T>;

export async function withCancellableProgress<T>(title: string, work: ProgressWork<T>): Promise<T> {
  const started = Date.now();
  let settled: PromiseSettledResult<T>;
  try {
    // The task given to VS Code is exactly the work: the notification is closed as soon as it settles.
    settled = { status: 'fulfilled', value: await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, (p, token) => work((message) => p.report({ message }), token)) };
  } catch (err) {
    settled = { status: 'rejected', reason: err };
  }
  // Wait until the workbench has closed the notification (an event-free wait: VS Code tells an
  // extension nothing about a notification's removal).
  const remaining = started + VSCODE_MIN_PROGRESS_MS + WORKBENCH_LAG_MS - Date.now();
  if (remaining > 0) await new Promise((resolve) => setTimeout(resolve, remaining));
  if (settled.status === 'rejected') throw settled.reason;
  return settled.value;
}
