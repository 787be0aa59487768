'use strict';

// agentkeepalive's `constants`: the same names, so code that reads them keeps working.
// On hyperagent's sockets SOCKET_NAME, SOCKET_CREATED_TIME and SOCKET_REQUEST_COUNT are readable;
// INIT_SOCKET is the agent method that prepares each new socket.
module.exports = Object.freeze({
  CURRENT_ID: Symbol('agentkeepalive#currentId'),
  CREATE_ID: Symbol('agentkeepalive#createId'),
  INIT_SOCKET: Symbol('agentkeepalive#initSocket'),
  CREATE_HTTPS_CONNECTION: Symbol('agentkeepalive#createHttpsConnection'),
  SOCKET_CREATED_TIME: Symbol('agentkeepalive#socketCreatedTime'),
  SOCKET_NAME: Symbol('agentkeepalive#socketName'),
  SOCKET_REQUEST_COUNT: Symbol('agentkeepalive#socketRequestCount'),
  SOCKET_REQUEST_FINISHED_COUNT: Symbol('agentkeepalive#socketRequestFinishedCount'),
});
