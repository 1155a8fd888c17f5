// A websocket to one of the console's live groups (console/group_consumers.py), reconnecting with
// a back-off doubling from 0.5 s to 10 s after a drop. `onEvent` gets each event (parsed JSON);
// `onState` gets "live", "reconnecting…", or why it stopped (4403: not allowed, 4404: gone), and
// `onOpen` runs on every (re)connection, so a page can read back what it missed while away.
export function liveSocket(path, { onEvent, onState, onOpen }) {
  let retry = 500;
  let opened = false;
  const say = onState || (() => {});
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}${path}`);
    socket.onopen = () => {
      retry = 500;
      say("live");
      if (onOpen) onOpen(opened);
      opened = true;
    };
    socket.onmessage = (message) => onEvent(JSON.parse(message.data));
    socket.onclose = (closed) => {
      if (closed.code === 4403) { say("not allowed: sign in with a role that may read this"); return; }
      if (closed.code === 4404) { say("gone: it does not exist any more"); return; }
      say("reconnecting…");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }
  connect();
}
