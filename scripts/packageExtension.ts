// Builds the minified bundles and packages the extension as a .vsix with vsce (offline), the
// way it is shipped; e2e tests and `npm start` install this file into code-server.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '..');
export const VSIX = path.join(REPO_ROOT, 'dist', 'sandbox-sessions.vsix');

export function packageExtension(): string {
  const env = { ...process.env, PATH: `${path.join(REPO_ROOT, 'node_modules', '.bin')}${path.delimiter}${process.env.PATH ?? ''}` };
  execFileSync('node', [path.join(REPO_ROOT, 'esbuild.mjs'), '--minify'], { cwd: REPO_ROOT, env, stdio: 'inherit' });
  // vsce writes the file but not its folder (a fresh clone has no dist/ before the build above).
  fs.mkdirSync(path.dirname(VSIX), { recursive: true });
  execFileSync(
    path.join(REPO_ROOT, 'node_modules', '.bin', 'vsce'),
    ['package', '--no-dependencies', '--skip-license', '--allow-missing-repository', '--no-rewrite-relative-links', '-o', VSIX],
    { cwd: REPO_ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  return VSIX;
}
