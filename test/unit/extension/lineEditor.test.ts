// The Sandbox terminal's line editor, fed keystrokes as VS Code delivers them.
import assert from 'node:assert/strict';
import { displayWidth, LineEditor } from '../../../extension/terminal/lineEditor';

function type(editor: LineEditor, ...keys: string[]) {
  const actions = keys.flatMap((k) => editor.handleInput(k).actions);
  return actions;
}

describe('terminal line editor', () => {
  it('submits the typed line on Enter', () => {
    const e = new LineEditor();
    e.begin('$ ');
    const actions = type(e, 'e', 'c', 'h', 'o', ' ', 'h', 'i', '\r');
    assert.deepEqual(actions, [{ kind: 'submit', line: 'echo hi' }]);
  });

  it('edits in the middle with the cursor keys, Home/End, Backspace and Delete', () => {
    const e = new LineEditor();
    e.begin('$ ');
    type(e, 'ac', '\x1b[D', 'b'); // a|c → ab|c
    assert.equal(e.line, 'abc');
    type(e, '\x1b[H', 'X', '\x1b[F', 'Y'); // Home, End
    assert.equal(e.line, 'XabcY');
    type(e, '\x1b[D', '\x1b[D', '\x7f'); // Xab|cY → backspace removes 'b'
    assert.equal(e.line, 'XacY');
    type(e, '\x01', '\x1b[3~'); // Ctrl+A then Delete removes 'X'
    assert.equal(e.line, 'acY');
  });

  it('walks history with up/down and keeps the draft', () => {
    const e = new LineEditor();
    e.begin('$ ');
    type(e, 'one\r');
    e.begin('$ ');
    type(e, 'two\r');
    e.begin('$ ');
    type(e, 'dr');
    type(e, '\x1b[A');
    assert.equal(e.line, 'two');
    type(e, '\x1b[A', '\x1b[A');
    assert.equal(e.line, 'one');
    type(e, '\x1b[B', '\x1b[B');
    assert.equal(e.line, 'dr');
    assert.deepEqual(e.historyEntries, ['one', 'two']);
  });

  it('turns Ctrl+C into an interrupt and Ctrl+D on an empty line into eof', () => {
    const e = new LineEditor();
    e.begin('$ ');
    assert.deepEqual(type(e, 'sleep 60', '\x03'), [{ kind: 'interrupt' }]);
    assert.equal(e.line, '');
    assert.deepEqual(type(e, '\x04'), [{ kind: 'eof' }]);
  });

  it('submits a multi-line paste line by line', () => {
    const e = new LineEditor();
    e.begin('$ ');
    const first = e.handleInput('\x1b[200~echo a\r\necho b\r\x1b[201~');
    assert.deepEqual(first.actions, [{ kind: 'submit', line: 'echo a' }]);
    e.begin('$ ');
    const next = e.takePendingInput();
    assert.ok(next !== undefined);
    assert.deepEqual(e.handleInput(next).actions, [{ kind: 'submit', line: 'echo b' }]);
  });

  it('redraws with the cursor placed by display width', () => {
    const e = new LineEditor();
    e.begin('> ');
    const out = e.handleInput('好x').output;
    assert.ok(out.endsWith('\r> 好x\x1b[K'));
    assert.ok(e.handleInput('\x1b[D\x1b[D').output.endsWith('\x1b[3D'));
    assert.equal(displayWidth('a好'), 3);
  });

  it('swallows unknown escape sequences and control characters', () => {
    const e = new LineEditor();
    e.begin('$ ');
    type(e, '\x1b[15~', '\x1b[I', 'a', '\x07');
    assert.equal(e.line, 'a');
  });
});
