// ui-parser.js of the custom process adapter (adapter UI parser contract v1): turns one
// stdout line of a run into transcript entries. It has no imports and runs in the browser.
export function parseStdoutLine(line, ts) {
  const text = String(line).replace(/\r?\n$/, "");
  if (text.startsWith("[custom-adapter] ")) {
    return [{ kind: "system", ts, text: text.slice("[custom-adapter] ".length) }];
  }
  return [{ kind: "stdout", ts, text }];
}

export function createStdoutParser() {
  return { parseLine: parseStdoutLine, reset() {} };
}
