// The sandbox worker process: runs one job at a time for the Python host, which starts it
// under Deno with no run permission, no host write, read access to the Pyodide package only,
// and network access only when the job asked for it. The host enforces wall time, memory and
// output from outside (it kills this process); this script only dispatches and reports.
//
// No job's code runs in this isolate. Every job runs in a Web Worker of its own, terminated
// when the job ends: JavaScript/TypeScript in a fresh worker, Python in a fresh Pyodide
// restored from a memory snapshot taken once, before any job's code ran. So a job can't
// change what a later job's interpreter, helpers or globals do (inside one interpreter
// nothing would stop it: Pyodide's `js`, `pyodide_js` and `ctypes` reach everything), and
// it can't reach this isolate's secret token. The next Python interpreter is restored in
// the background after each job, so a job rarely waits for it.
//
// Protocol: the first stdin line is the hello (secret token, options). Every later stdin line
// is one job (JSON); every reply is "SA1 <token> <json>\n" on stdout: {started} once the
// job's interpreter is ready and its code starts (the host's wall-time limit runs from
// there), then the outcome. Anything else on stdout
// or stderr (a raw write by the executed code) is the job's output as the host sees it; the
// host counts it against the job's output cap.

type Files = Record<string, string>; // path inside the workspace -> base64 content
interface Job {
  id: string;
  language: "python" | "javascript" | "typescript";
  code: string;
  files: Files;
  network: boolean;
  maxLogChars: number;
  maxLogLines: number;
  maxFileBytes: number;
  maxReplyBytes: number;
}
interface Hello { token: string; warm: boolean; network: boolean; pyodide: string }
interface Log { stream: "stdout" | "stderr"; message: string; time: number }
type Outcome = Record<string, unknown>;

const encoder = new TextEncoder();
const WORKER = new URL("./script_worker.ts", import.meta.url);
// characters kept of an error's message and of its stack
const MAX_ERROR_CHARS = 100_000;
let hello: Hello = { token: "", warm: false, network: false, pyodide: "" };

function frame(payload: unknown): Uint8Array {
  return encoder.encode(`SA1 ${hello.token} ${JSON.stringify(payload)}\n`);
}

function write(bytes: Uint8Array): void {
  let written = 0;
  while (written < bytes.length) written += Deno.stdout.writeSync(bytes.subarray(written));
}

function clip(value: unknown, max: number): string {
  const text = String(value ?? "");
  return text.length > max ? `${text.slice(0, max)}... [truncated]` : text;
}

/** A job's logs: at most `maxChars` characters (a line end counts as one) and `maxLines` lines. */
class LogSink {
  logs: Log[] = [];
  chars = 0;
  truncated = false;
  constructor(private maxChars: number, private maxLines: number) {}
  push(stream: Log["stream"], message: string): void {
    if (this.truncated) return;
    if (this.chars + message.length + 1 > this.maxChars || this.logs.length + 1 >= this.maxLines) {
      this.logs.push({ stream: "stderr", message: "[output truncated]", time: Date.now() });
      this.truncated = true;
      return;
    }
    this.chars += message.length + 1;
    this.logs.push({ stream, message, time: Date.now() });
  }
}

// ---------------------------------------------------------------- workers

function spawn(permissions: Record<string, unknown>): Worker {
  // deno-lint-ignore no-explicit-any
  return new Worker(WORKER, { type: "module", deno: { permissions } as any });
}

/** Post one message and wait for the first answer (or the worker's crash). */
function ask(worker: Worker, message: unknown): Promise<Outcome> {
  return new Promise((resolve) => {
    worker.onmessage = (event: MessageEvent) => {
      const data = (event.data ?? {}) as Outcome;
      if (data.kind !== "log") resolve(data);
    };
    worker.onerror = (event: ErrorEvent) => {
      event.preventDefault();
      resolve({ kind: "crashed", message: event.message });
    };
    worker.postMessage(message);
  });
}

/** Run a job in `worker`: its log messages go to `sink`; the first other message ends it. */
function converse(worker: Worker, message: unknown, sink: LogSink, job: Job): Promise<Outcome> {
  return new Promise((resolve) => {
    const finish = (outcome: Outcome) => {
      worker.terminate();
      resolve(outcome);
    };
    worker.onmessage = (event: MessageEvent) => {
      const data = (event.data ?? {}) as Outcome;
      if (data.kind === "log") {
        sink.push(data.stream === "stderr" ? "stderr" : "stdout", String(data.message));
        return;
      }
      finish(data);
    };
    worker.onerror = (event: ErrorEvent) => {
      event.preventDefault();
      finish({ ok: false, name: "Error", message: event.message, stack: "", files: job.files });
    };
    worker.onmessageerror = () => finish({ ok: false, name: "Error", message: "unreadable message", files: job.files });
    worker.postMessage(message);
  });
}

// ---------------------------------------------------------------- Python (Pyodide)

const python = {
  snapshot: null as Promise<Uint8Array> | null,
  spare: null as Promise<Worker> | null,
};

function pythonPermissions(network: boolean): Record<string, unknown> {
  // read only to load Pyodide: the worker revokes it before any job's code runs
  return { net: network ? "inherit" : false, read: [hello.pyodide], write: false, env: false, run: false,
           ffi: false, sys: false, import: false };
}

async function makeSnapshot(): Promise<Uint8Array> {
  const worker = spawn(pythonPermissions(false));
  try {
    const answer = await ask(worker, { kind: "snapshot" });
    if (answer.kind !== "snapshot") throw new Error(String(answer.message ?? "Pyodide did not load"));
    return answer.snapshot as Uint8Array;
  } finally {
    worker.terminate();
  }
}

/** A worker holding a fresh interpreter, restored from the snapshot. The snapshot is posted
 * as a copy (never shared memory), so no worker can change what the next one starts from. */
async function bootPython(network: boolean): Promise<Worker> {
  python.snapshot ??= makeSnapshot();
  let snapshot: Uint8Array;
  try {
    snapshot = await python.snapshot;
  } catch (err) {
    python.snapshot = null;
    throw err;
  }
  const worker = spawn(pythonPermissions(network));
  const answer = await ask(worker, { kind: "boot", snapshot, network });
  if (answer.kind !== "ready") {
    worker.terminate();
    throw new Error(String(answer.message ?? "Pyodide did not start"));
  }
  return worker;
}

function prepareSpare(): Promise<Worker> {
  const next = bootPython(hello.network);
  next.catch(() => {}); // a failed spare is retried when a job needs it
  python.spare = next;
  return next;
}

async function takePython(network: boolean): Promise<Worker> {
  const spare = network === hello.network ? python.spare : null;
  python.spare = null;
  if (spare) {
    try {
      return await spare;
    } catch {
      // start one afresh below
    }
  }
  return await bootPython(network);
}

async function runPython(job: Job, sink: LogSink): Promise<Outcome> {
  let worker: Worker;
  try {
    worker = await takePython(job.network);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return { ok: false, name: "SandboxError", message: `Python could not start: ${message}`, files: job.files };
  }
  write(frame({ id: job.id, started: true }));
  return await converse(worker, { kind: "python", ...job }, sink, job);
}

// ---------------------------------------------------------------- JavaScript / TypeScript

function runScript(job: Job, sink: LogSink): Promise<Outcome> {
  write(frame({ id: job.id, started: true }));
  const worker = spawn({
    net: job.network ? "inherit" : false,
    read: false, write: false, env: false, run: false, ffi: false, sys: false, import: false,
  });
  return converse(worker, { kind: "script", ...job }, sink, job);
}

// ---------------------------------------------------------------- main loop

/** The outcome as the worker reported it, where the job's own code ran: keep only the known
 * fields, of the right types, within the job's limits. */
function settle(raw: Outcome, job: Job): Outcome {
  let files: Outcome = { files: job.files };
  if (raw.filesOverLimit === true) {
    files = { filesOverLimit: true };
  } else if (raw.files && typeof raw.files === "object") {
    const checked: Files = {};
    let size = 0;
    for (const [name, data] of Object.entries(raw.files as Record<string, unknown>)) {
      if (typeof data !== "string") continue;
      checked[name] = data;
      size += name.length + data.length * 3 / 4;
    }
    files = size > job.maxFileBytes ? { filesOverLimit: true } : { files: checked };
  }
  if (raw.ok === true) {
    let resultJson: string | undefined;
    try {
      resultJson = typeof raw.resultJson === "string" ? raw.resultJson : JSON.stringify(raw.result ?? null);
    } catch {
      resultJson = JSON.stringify(String(raw.result));
    }
    resultJson ??= "null";
    if (resultJson.length > job.maxLogChars) {
      return { ok: false, name: "OutputLimitExceeded", stack: "", ...files,
               message: `the result passed the limit of ${job.maxLogChars} characters (as JSON)` };
    }
    return { ok: true, resultJson, ...files };
  }
  return { ok: false, name: clip(raw.name ?? "Error", 200), message: clip(raw.message, MAX_ERROR_CHARS),
           stack: clip(raw.stack, MAX_ERROR_CHARS), ...files };
}

async function handle(job: Job): Promise<void> {
  const sink = new LogSink(job.maxLogChars, job.maxLogLines);
  const started = performance.now();
  let outcome: Outcome;
  try {
    outcome = settle(job.language === "python" ? await runPython(job, sink) : await runScript(job, sink), job);
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    outcome = { ok: false, name: e.name, message: clip(e.message, MAX_ERROR_CHARS), stack: "", files: job.files };
  }
  const payload = { id: job.id, ...outcome, logs: sink.logs, ms: performance.now() - started };
  let bytes = frame(payload);
  if (bytes.length > job.maxReplyBytes) {
    bytes = frame({ ...payload, files: undefined, filesOverLimit: true });
  }
  if (bytes.length > job.maxReplyBytes) {
    bytes = frame({ id: job.id, ok: false, name: "OutputLimitExceeded", message: "the reply passed its size limit",
                    stack: "", filesOverLimit: true, logs: [], ms: payload.ms });
  }
  write(bytes);
}

async function main(): Promise<void> {
  const reader = Deno.stdin.readable.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut: number;
    while ((cut = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 1);
      if (!hello.token) {
        hello = JSON.parse(line) as Hello;
        if (hello.warm) await prepareSpare();
        write(frame({ ready: true }));
        continue;
      }
      if (!line.trim()) continue;
      const job = JSON.parse(line) as Job;
      await handle(job);
      if (job.language === "python") prepareSpare();
    }
  }
}

await main();
