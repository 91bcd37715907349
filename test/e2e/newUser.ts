// The environment of a person who has just cloned the project: a fresh HOME, no SANDBOX_SESSIONS_* or XDG_*
// variables, and a PATH without this project's tools. README's commands are tested in it, exactly as written.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** PATH as a user's shell has it: without this project's node_modules/.bin and without a desktop `code`. */
export function userPath(): string {
  return (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((dir) => dir !== '' && !dir.includes('node_modules'))
    // With a desktop `code` on PATH, `npm start` opens it instead of code-server (README).
    .filter((dir) => !fs.existsSync(path.join(dir, 'code')))
    .join(path.delimiter);
}

/** A new user's environment with a fresh HOME (under the system's temp folder, named by `purpose`). */
export function newUserEnv(purpose: string): { home: string; env: NodeJS.ProcessEnv } {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), `sandbox-sessions-${purpose}-`));
  return { home, env: { HOME: home, PATH: userPath(), LANG: 'C.UTF-8' } };
}
