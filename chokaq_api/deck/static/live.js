// The live stream: GET /events (Server-Sent Events) read with fetch() so the bearer token goes in a header
// (EventSource cannot send one, and the token must never be in a URL). Reconnects by itself with
// Last-Event-ID, so no event is missed across a reconnect or the server's end of a long stream.

import { API, session } from "./api.js";

export function follow({ onEvent, onState }) {
  let lastId = null;
  let stopped = false;
  let controller = null;
  let delay = 1000;

  async function once() {
    controller = new AbortController();
    const headers = { Authorization: `Bearer ${session.token}`, Accept: "text/event-stream" };
    if (lastId !== null) headers["Last-Event-ID"] = String(lastId);
    const response = await fetch(`${API}/events`, { headers, signal: controller.signal, cache: "no-store", credentials: "omit" });
    if (response.status === 401) throw Object.assign(new Error("token refused"), { fatal: true });
    if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
    onState("live");
    delay = 1000;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        dispatch(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
      }
    }
  }

  function dispatch(block) {
    let id = null;
    let kind = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const at = line.indexOf(":");
      const name = at < 0 ? line : line.slice(0, at);
      const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
      if (name === "id") id = value;
      else if (name === "event") kind = value;
      else if (name === "data") data.push(value);
    }
    if (id !== null && /^\d+$/.test(id)) lastId = Number(id);
    if (!data.length) return;
    let body;
    try { body = JSON.parse(data.join("\n")); } catch { return; }
    onEvent({ ...body, kind: body.kind || kind });
  }

  (async () => {
    while (!stopped) {
      try {
        await once();
        if (!stopped) onState("reconnecting");  // the server ended the stream (Api.SseMaxDuration)
      } catch (error) {
        if (stopped) return;
        if (error.fatal) { onState("off"); return; }
        onState("reconnecting");
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 15000);
      }
    }
  })();

  return {
    stop() {
      stopped = true;
      if (controller) controller.abort();
    },
  };
}
