// Editing a line in the Sandbox terminal of a real VS Code: a line longer than the terminal is
// wide shows once, wrapped at the width VS Code gives the terminal (issue 24, defect 7), and Tab
// completes file names from the sandbox instead of inserting a tab (defect 10). What VS Code
// would show is worked out from everything the terminal was sent, with the terminal's real
// column count.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { VtScreen } from '../../fixtures/vtScreen';
import { api, newLocalSandbox, plain, until } from './helpers';

describe('Sandbox terminal line editing', () => {
  let sandbox: SandboxSummary;
  let terminal: vscode.Terminal;
  const transcript = async () => (await api()).terminalTranscript(terminal) ?? '';
  const promptText = () => `${sandbox.ref.name}:/$ `;
  /** The rows VS Code's terminal shows for everything written to it. */
  const screen = async () => {
    const columns = (await api()).terminalColumns(terminal);
    assert.ok(columns, 'the terminal has dimensions');
    const vt = new VtScreen(columns);
    vt.write(await transcript());
    return { rows: vt.lines(), columns };
  };
  /** Sends keys one by one, as a person types them. */
  const typeKeys = async (text: string) => {
    for (const ch of text) terminal.sendText(ch, false);
  };

  before(async () => {
    sandbox = await newLocalSandbox();
    const client = await (await api()).registry.connection(sandbox.key)!.client();
    await client.runCommand({ shell: 'printf "hello from a file\\n" > hello-file.txt && mkdir -p src && : > src/app.js' });
    const t = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openTerminal', sandbox.key);
    assert.ok(t, 'a terminal was opened');
    terminal = t;
    terminal.show();
    await until(async () => plain(await transcript()).endsWith(promptText()) && (await api()).terminalColumns(terminal) !== undefined, 'the prompt and the terminal size');
  });
  after(() => terminal?.dispose());

  it('shows a line longer than the terminal once, wrapped, while it is typed', async () => {
    const { columns } = await screen();
    const words: string[] = [];
    for (let i = 0; words.join(' ').length < columns * 2.5; i++) words.push(`word${i}`);
    const line = `echo ${words.join(' ')}`;
    await typeKeys(line);
    const expected: string[] = [];
    const text = `${promptText()}${line}`;
    for (let i = 0; i < text.length; i += columns) expected.push(text.slice(i, i + columns).trimEnd());
    let last: string[] = [];
    await until(async () => {
      last = (await screen()).rows.filter((r) => r !== '');
      return last.at(-1) === expected.at(-1);
    }, 'the whole line on the screen');
    // The prompt is on the screen once, followed by the line wrapped at the terminal's width.
    assert.equal(last.filter((r) => r.includes(promptText().trim())).length, 1, `the prompt shows once:\n${last.join('\n')}`);
    assert.deepEqual(last.slice(-expected.length), expected);
    // Editing in the middle of the wrapped line redraws it in place.
    for (let i = 0; i < columns + 3; i++) terminal.sendText('\x1b[D', false);
    terminal.sendText('X', false);
    const at = line.length - (columns + 3);
    const edited = `${line.slice(0, at)}X${line.slice(at)}`;
    const editedText = `${promptText()}${edited}`;
    const editedRows: string[] = [];
    for (let i = 0; i < editedText.length; i += columns) editedRows.push(editedText.slice(i, i + columns).trimEnd());
    await until(async () => {
      last = (await screen()).rows.filter((r) => r !== '');
      return last.at(-1) === editedRows.at(-1);
    }, 'the edited line');
    assert.equal(last.filter((r) => r.includes(promptText().trim())).length, 1, `the prompt shows once after the edit:\n${last.join('\n')}`);
    assert.deepEqual(last.slice(-editedRows.length), editedRows);
    terminal.sendText('\x05\x15', false); // End, Ctrl+U: clear the line
    await until(async () => (await screen()).rows.filter((r) => r !== '').at(-1) === promptText().trimEnd(), 'the cleared line');
  });

  it('completes a file name on Tab from the sandbox listing', async () => {
    const before = plain(await transcript()).length;
    await typeKeys('cat hello-f');
    terminal.sendText('\t', false);
    await until(async () => plain(await transcript()).slice(before).includes('cat hello-file.txt '), 'the completed name');
    assert.ok(!(await transcript()).includes('\t'), 'no tab character reached the screen');
    terminal.sendText('\r', false);
    await until(async () => plain(await transcript()).slice(before).includes('hello from a file'), 'the file printed by the completed command');
    // A folder completes with a slash, ready for the next name.
    const again = plain(await transcript()).length;
    await typeKeys('ls sr');
    terminal.sendText('\t', false);
    await until(async () => plain(await transcript()).slice(again).endsWith('ls src/'), 'the completed folder');
    terminal.sendText('\x05\x15', false);
  });
});
