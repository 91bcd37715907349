// The `sandboxSessions.kubeconfig` setting as the companion server's KUBECONFIG: a path list
// (separated by the platform's delimiter, as KUBECONFIG is) whose entries may start with `~`.
// Empty means "inherit": the server then reads KUBECONFIG from VS Code's environment, else
// ~/.kube/config, else the in-cluster service account. No vscode import: it is plain data.
import os from 'node:os';
import path from 'node:path';

/** The KUBECONFIG value for a setting, or undefined to inherit VS Code's environment. */
export function kubeconfigFromSetting(value: string | undefined, home: string = os.homedir(), delimiter: string = path.delimiter): string | undefined {
  const entries = (value ?? '')
    .split(delimiter)
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => (entry === '~' ? home : /^~[\\/]/.test(entry) ? path.join(home, entry.slice(2)) : entry));
  return entries.length > 0 ? entries.join(delimiter) : undefined;
}
