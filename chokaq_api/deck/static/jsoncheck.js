// A strict JSON checker that says where the text goes wrong (line, column and what was expected), the
// same in every browser: JSON.parse's messages differ between engines and some give no position.

export function checkJson(text) {
  let i = 0;
  const fail = (message, at = i) => {
    const before = text.slice(0, at);
    const line = before.split("\n").length;
    const column = at - before.lastIndexOf("\n");
    throw Object.assign(new SyntaxError(message), { offset: at, line, column });
  };
  const ws = () => { while (i < text.length && " \t\n\r".includes(text[i])) i++; };
  const describe = () => (i >= text.length ? "the end of the text" : `'${text[i]}'`);

  function value() {
    ws();
    const c = text[i];
    if (c === "{") return object();
    if (c === "[") return array();
    if (c === '"') return string();
    if (c === "-" || (c >= "0" && c <= "9")) return number();
    for (const [word, v] of [["true", true], ["false", false], ["null", null]]) {
      if (text.startsWith(word, i)) { i += word.length; return v; }
    }
    return fail(`Expected a value, found ${describe()}`);
  }

  // The members of an object or the elements of an array, after the opening bracket, up to `close`.
  function members(close, what, item) {
    i++;
    ws();
    if (text[i] === close) { i++; return; }
    for (;;) {
      item();
      const end = i;
      ws();
      if (text[i] === ",") { i++; continue; }
      if (text[i] === close) { i++; return; }
      // Point at the end of the last value: the place a missing comma belongs.
      fail(`Expected ',' or '${close}' after ${what}, found ${describe()} — a missing comma?`, end);
    }
  }

  function object() {
    const out = {};
    members("}", "property value", () => {
      ws();
      if (text[i] !== '"') fail(`Expected a property name in double quotes, found ${describe()}`);
      const key = string();
      ws();
      if (text[i] !== ":") fail(`Expected ':' after property name, found ${describe()}`);
      i++;
      out[key] = value();
    });
    return out;
  }

  function array() {
    const out = [];
    members("]", "array element", () => out.push(value()));
    return out;
  }

  function string() {
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') {
      const c = text[i];
      if (c < " ") fail("Control character in a string (escape it, e.g. \\n)");
      if (c === "\\") {
        const n = text[i + 1];
        if (n === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) fail("Invalid \\u escape (four hex digits)");
          i += 6;
          continue;
        }
        if (!'"\\/bfnrt'.includes(n || "")) fail(`Invalid escape \\${n || ""}`);
        i += 2;
        continue;
      }
      i++;
    }
    if (i >= text.length) fail("Unterminated string", start);
    i++;
    return JSON.parse(text.slice(start, i));
  }

  function number() {
    const match = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
    if (!match) fail("Invalid number");
    i += match[0].length;
    return Number(match[0]);
  }

  try {
    const result = value();
    ws();
    if (i < text.length) fail(`Unexpected ${describe()} after the JSON value`);
    return { ok: true, value: result };
  } catch (error) {
    if (!(error instanceof SyntaxError) || error.line === undefined) throw error;
    return { ok: false, error: { message: error.message, line: error.line, column: error.column, offset: error.offset } };
  }
}
