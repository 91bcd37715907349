// Where the Download Artifacts… dialog starts: where a person expects their files, decided the way
// Remote-SSH decides for a remote window. The download is written by the companion server, which
// runs beside this extension host — on the machine the person works on through this window (their
// desktop, or the remote machine of a remote window), and the dialog browses that machine. So:
// the first local (file:) workspace folder of the window, when there is one; else `Downloads` in
// the user account's home on that machine, else that home itself. The account's home comes from
// the user database, not $HOME: a browser-served editor (code-server from `npm start`) runs with a
// HOME of its own (its settings and extensions), a folder the person never chose for their files.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The home folder of the account this extension host runs as (the user database's, not $HOME). */
export function accountHome(): string {
  try {
    const home = os.userInfo().homedir;
    if (home && path.isAbsolute(home) && fs.existsSync(home)) return home;
  } catch {
    // No user database entry (an arbitrary uid in a container): $HOME is all there is.
  }
  return os.homedir();
}

/** The folder the download dialog starts in, for a window with these workspace folders. */
export function defaultDownloadFolder(folders: readonly { uri: { scheme: string; fsPath: string } }[], home: string = accountHome()): string {
  const local = folders.find((f) => f.uri.scheme === 'file');
  if (local) return local.uri.fsPath;
  const downloads = path.join(home, 'Downloads');
  return fs.existsSync(downloads) ? downloads : home;
}
