// Bac's JavaScript/TypeScript kernel: tslab's converter, executor and ZeroMQ server, with
// a cell's last expression sent as an `execute_result` and a thrown error as an `error`
// message (name, message, stack), as Jupyter kernels report them. tslab itself prints the
// last value with console.log and a thrown error to stderr, and says only "error".
//
//   node jslab.js <tslab's dist directory> <connection file> [--js]
"use strict";

const path = require("path");
const util = require("util");

const [distDir, configPath, ...flags] = process.argv.slice(2);
const isJs = flags.includes("--js");
const converter = require(path.join(distDir, "converter.js"));
const executorModule = require(path.join(distDir, "executor.js"));
const jupyter = require(path.join(distDir, "jupyter.js"));

// The last expression's variable of the cell being converted: tslab is told there is none
// (so it neither prints nor deletes it) and this kernel reads and sends it instead.
let lastExpressionVar = null;
// The compile diagnostics of the cell being converted (TypeScript's codes).
let diagnosticCodes = [];

function converterSet() {
  const made = {};
  const make = (isBrowser) => {
    const conv = converter.createConverter({ isJS: isJs, isBrowser });
    const convert = conv.convert.bind(conv);
    conv.convert = (prevDecl, src) => {
      const converted = convert(prevDecl, src);
      lastExpressionVar = converted.lastExpressionVar || null;
      diagnosticCodes = (converted.diagnostics || []).map((d) => d.code);
      return { ...converted, lastExpressionVar: undefined };
    };
    return conv;
  };
  return {
    get node() { return (made.node ??= make(false)); },
    get browser() { return (made.browser ??= make(true)); },
    close() { for (const conv of Object.values(made)) conv.close(); },
  };
}

function errorOf(thrown) {
  if (thrown instanceof Error || (thrown && typeof thrown === "object" && "stack" in thrown)) {
    const name = thrown.name || (thrown.constructor && thrown.constructor.name) || "Error";
    const stack = String(thrown.stack || `${name}: ${thrown.message}`).split("\n");
    // Frames of node's vm and of tslab itself say nothing about the user's code.
    const traceback = stack.filter((line) => !/\(node:|^\s+at node:/.test(line) && !line.includes(distDir) && !line.includes(__filename));
    return { ename: String(name), evalue: String(thrown.message ?? ""), traceback };
  }
  const text = util.inspect(thrown);
  return { ename: "Error", evalue: text, traceback: [`Uncaught ${text}`] };
}

// What node itself would have thrown for the first diagnostic: an unknown name is a
// ReferenceError, TypeScript's 1xxx codes are syntax errors; the rest are type errors.
function diagnosticName(codes) {
  const code = codes[0];
  if (code === 2304 || code === 2552 || code === 2662 || code === 2663) return "ReferenceError";
  if (code !== undefined && code >= 1000 && code < 2000) return "SyntaxError";
  return "TypeError";
}

class Handler extends jupyter.JupyterHandlerImpl {
  async handleExecuteImpl(req, writeStream, writeDisplayData, writeResult) {
    process.stdout.write = this.createWriteToIopub("stdout", writeStream);
    process.stderr.write = this.createWriteToIopub("stderr", writeStream);
    jupyter.lastWriteDisplayData = writeDisplayData;
    const count = ++this.execCount;
    // tslab's executor reports a failure by printing it with console.error and returning
    // false: a single-argument call is held back until the cell's outcome is known (a
    // thrown value), several-argument ones are compile diagnostics.
    const consoleError = console.error;
    let held = null;
    const diagnostics = [];
    diagnosticCodes = [];
    const release = () => {
      const args = held;
      held = null;
      if (args !== null) consoleError(...args);
    };
    const write = { out: process.stdout.write, err: process.stderr.write };
    process.stdout.write = (...a) => { release(); return write.out(...a); };
    process.stderr.write = (...a) => { release(); return write.err(...a); };
    console.error = (...args) => {
      release();
      if (args.length === 1) held = args;
      else if (typeof args[0] === "string" && args[0].startsWith("%s%d:%d")) diagnostics.push(util.format(...args));
      else consoleError(...args);
    };
    lastExpressionVar = null;
    let ok;
    try {
      ok = await this.executor.execute(req.code);
    } finally {
      console.error = consoleError;
      process.stdout.write = write.out;
      process.stderr.write = write.err;
    }
    if (!ok) {
      let error;
      if (held !== null) error = errorOf(held[0]);
      else {
        const text = diagnostics.join("\n");
        error = { ename: diagnosticName(diagnosticCodes), evalue: text, traceback: diagnostics };
      }
      held = null;
      throw { count, error };
    }
    release();
    const name = lastExpressionVar;
    if (name !== null && Object.prototype.hasOwnProperty.call(this.executor.locals, name)) {
      const value = this.executor.locals[name];
      delete this.executor.locals[name];
      if (value !== undefined) {
        writeResult(count, { "text/plain": util.inspect(value) });
      }
    }
    return count;
  }

  async handleExecute(req, writeStream, writeDisplayData, writeResult, writeError) {
    let failed = null;
    let count;
    try {
      count = await this.execQueue.add(
        () => this.handleExecuteImpl(req, writeStream, writeDisplayData, writeResult));
    } catch (e) {
      if (e && e.error) {
        failed = e.error;
        count = e.count;
      } else if (e && e.constructor && e.constructor.name === "TaskCanceledError") {
        return { status: "abort" };
      } else {
        failed = errorOf(e);
      }
      // tslab aborts the requests that arrive within 200 ms of a failed cell; Bac's server
      // sends one cell at a time and means each, so the queue is reset at once (a failed
      // task would otherwise fail every later one).
      this.execQueue.reset();
    }
    if (failed === null) return { status: "ok", execution_count: count };
    writeError(failed);
    return { status: "error", execution_count: count, ...failed };
  }
}

class Server extends jupyter.ZmqServer {
  async handleExecute(sock, msg) {
    const send = (type, content) => {
      const out = msg.createReply();
      out.header.msg_type = type;
      out.content = content;
      out.signAndSend(this.connInfo.key, this.iopub);
    };
    const writeStream = (name, text) => send("stream", { name, text });
    const writeDisplayData = (data, update) =>
      send(update ? "update_display_data" : "display_data", data);
    const writeResult = (count, data) =>
      send("execute_result", { execution_count: count, data, metadata: {} });
    const writeError = (error) => send("error", error);
    const reply = msg.createReply();
    reply.header.msg_type = "execute_reply";
    reply.content = await this.handler.handleExecute(
      msg.content, writeStream, writeDisplayData, writeResult, writeError);
    reply.signAndSend(this.connInfo.key, sock);
  }
}

const convs = converterSet();
convs.node; // compile the converter now, not on the first cell
// The executor's console: looked up at each call, so a cell's replacement is seen.
const executor = executorModule.createExecutor(process.cwd(), convs, {
  log: (...args) => console.log(...args),
  error: (...args) => console.error(...args),
});
const server = new Server(new Handler(executor, isJs), configPath);
process.on("SIGINT", () => executor.interrupt());
process.on("uncaughtException", (err) => console.error("UncaughtException:", err));
process.on("unhandledRejection", (reason) => console.error("UnhandledPromiseRejection:", reason));
server.init();
