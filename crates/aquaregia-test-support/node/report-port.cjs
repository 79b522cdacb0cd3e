// Preloaded into a Node server (`node --require report-port.cjs server.js`): once any server
// listens, it prints `aquaregia-test-port <port>` on stderr. A test starts the server on port 0
// and reads the port it got, instead of picking a "free" port first (a race).
"use strict";
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  this.once("listening", () => {
    const address = this.address();
    if (address && typeof address === "object") {
      process.stderr.write(`aquaregia-test-port ${address.port}\n`);
    }
  });
  return listen.apply(this, args);
};
