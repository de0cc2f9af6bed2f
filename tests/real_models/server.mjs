// An OpenAI-compatible chat server for real GGUF models on 127.0.0.1, for the real-model tier.
//
//   node server.mjs --model ID=PATH [--model ID=PATH ...] [--port 0] [--threads 1]
//                   [--context 4096] [--max-tokens 1024] [--log FILE]
//
// It prints "listening http://127.0.0.1:PORT" on stdout once every model is loaded.
// GET /v1/models lists the models; POST /v1/chat/completions answers, streamed or not.
//
// What it does with a request is what a real server does, not a shape of its own:
// - response_format {"type":"json_schema"} is turned into a grammar by node-llama-cpp's own
//   converter (createGrammarForJsonSchema). A schema that uses a keyword that converter does
//   not know is refused with a 400 naming it, since the converter would silently read it as
//   "null" and the model could only ever write null there;
// - {"type":"json_object"} constrains the output to any JSON object (llama.cpp's json grammar);
// - no response_format (or {"type":"text"}): free text;
// - max_tokens caps the reply (default --max-tokens); finish_reason is "length" when the cap
//   cut it and "stop" when the model ended it.
// How a chat becomes the model's prompt is decided here and said in every reply (the
// "prompt_format" field and the X-Prompt-Format header) and in the startup log: a model whose
// GGUF carries a chat template gets that template; one without (a base model) gets the
// messages' contents joined by blank lines, with no role markers.
// Every generation runs on one thread (a busy two-core machine stalls llama.cpp's thread
// barrier with more), one at a time per model. Sampling is llama.cpp's server default
// (temperature 0.8) unless the request says otherwise, with a fixed seed (42) unless the
// request gives one, so the same request gets the same reply.

import fs from "node:fs";
import http from "node:http";
import crypto from "node:crypto";
import {getLlama, LlamaCompletion, LlamaLogLevel, resolveChatWrapper} from "node-llama-cpp";

function parseArgs(argv) {
    const opts = {models: [], port: 0, threads: 1, context: 4096, maxTokens: 1024, log: null, seed: 42};
    for (let i = 0; i < argv.length; i++) {
        const flag = argv[i];
        const value = argv[i + 1];
        if (value === undefined) throw new Error(`${flag} needs a value`);
        i++;
        if (flag === "--model") {
            const eq = value.indexOf("=");
            if (eq < 1) throw new Error(`--model wants ID=PATH, got ${value}`);
            opts.models.push({id: value.slice(0, eq), path: value.slice(eq + 1)});
        } else if (flag === "--port") opts.port = Number(value);
        else if (flag === "--threads") opts.threads = Number(value);
        else if (flag === "--context") opts.context = Number(value);
        else if (flag === "--max-tokens") opts.maxTokens = Number(value);
        else if (flag === "--log") opts.log = value;
        else if (flag === "--seed") opts.seed = Number(value);
        else throw new Error(`unknown flag ${flag}`);
    }
    if (opts.models.length === 0) throw new Error("no --model given");
    return opts;
}

// ----------------------------------------------------------------- schema → grammar, honestly

// The keywords node-llama-cpp's GbnfJsonSchema understands, and the annotations that
// constrain nothing. Any other keyword changes what a schema allows in a way the converter
// would not see, so the request is refused instead of being answered under another shape.
const SCHEMA_KEYWORDS = new Set([
    "type", "enum", "const", "oneOf", "properties", "additionalProperties", "required",
    "minProperties", "maxProperties", "items", "prefixItems", "minItems", "maxItems",
    "minLength", "maxLength", "format", "$defs", "$ref",
]);
const ANNOTATIONS = new Set(["description", "title", "default", "examples", "$schema", "$id", "$comment"]);
const CONSTRAINING = ["type", "enum", "const", "oneOf", "$ref"];

function unsupportedKeyword(node, where) {
    if (node === null || typeof node !== "object" || Array.isArray(node)) {
        return `${where}: a schema must be an object`;
    }
    for (const key of Object.keys(node)) {
        if (!SCHEMA_KEYWORDS.has(key) && !ANNOTATIONS.has(key)) return `${where}: keyword "${key}"`;
    }
    if (!CONSTRAINING.some((k) => k in node)) {
        return `${where}: no type, enum, const, oneOf or $ref (the converter reads that as null)`;
    }
    const children = [];
    for (const [k, v] of Object.entries(node.properties ?? {})) children.push([v, `${where}.properties.${k}`]);
    for (const [k, v] of Object.entries(node.$defs ?? {})) children.push([v, `${where}.$defs.${k}`]);
    if (node.items !== undefined) children.push([node.items, `${where}.items`]);
    (node.prefixItems ?? []).forEach((v, i) => children.push([v, `${where}.prefixItems[${i}]`]));
    (node.oneOf ?? []).forEach((v, i) => children.push([v, `${where}.oneOf[${i}]`]));
    if (node.additionalProperties !== undefined && typeof node.additionalProperties === "object") {
        children.push([node.additionalProperties, `${where}.additionalProperties`]);
    }
    for (const [child, at] of children) {
        const found = unsupportedKeyword(child, at);
        if (found) return found;
    }
    return null;
}

class RequestError extends Error {
    constructor(status, message, param = null) {
        super(message);
        this.status = status;
        this.param = param;
    }
}

async function grammarFor(llama, responseFormat) {
    if (responseFormat === undefined || responseFormat === null) return {grammar: null, kind: "none"};
    const type = responseFormat.type;
    if (type === "text") return {grammar: null, kind: "none"};
    if (type === "json_object") return {grammar: await llama.getGrammarFor("json"), kind: "json_object"};
    if (type === "json_schema") {
        const schema = responseFormat.json_schema?.schema;
        if (schema === undefined) {
            throw new RequestError(400, "response_format.json_schema.schema is missing", "response_format");
        }
        const problem = unsupportedKeyword(schema, "$");
        if (problem) {
            throw new RequestError(
                400,
                `response_format: json_schema not supported by this server's grammar converter (${problem})`,
                "response_format",
            );
        }
        try {
            return {grammar: await llama.createGrammarForJsonSchema(schema), kind: "json_schema"};
        } catch (err) {
            throw new RequestError(400, `response_format: json_schema could not be turned into a grammar: ${err.message}`, "response_format");
        }
    }
    throw new RequestError(400, `response_format type ${JSON.stringify(type)} is not supported`, "response_format");
}

// ----------------------------------------------------------------------------- chat → prompt

function messageText(content) {
    if (typeof content === "string") return content;
    if (Array.isArray(content)) return content.map((p) => (typeof p?.text === "string" ? p.text : "")).join("");
    return "";
}

function promptFor(entry, messages) {
    if (entry.chatWrapper === null) {
        return messages.map((m) => messageText(m.content)).join("\n\n") + "\n\n";
    }
    const chatHistory = [];
    for (const m of messages) {
        const text = messageText(m.content);
        if (m.role === "system") chatHistory.push({type: "system", text});
        else if (m.role === "assistant") chatHistory.push({type: "model", response: [text]});
        else chatHistory.push({type: "user", text});
    }
    chatHistory.push({type: "model", response: []});
    return entry.chatWrapper.generateContextState({chatHistory}).contextText;
}

// ------------------------------------------------------------------------------------ serving

async function loadModels(llama, opts) {
    const entries = new Map();
    for (const {id, path} of opts.models) {
        const started = Date.now();
        const model = await llama.loadModel({modelPath: path});
        const template = model.fileInfo?.metadata?.tokenizer?.chat_template;
        const hasTemplate = typeof template === "string" && template.trim() !== "";
        const chatWrapper = hasTemplate ? resolveChatWrapper(model) : null;
        const promptFormat = hasTemplate
            ? `chat template from the GGUF (${chatWrapper.wrapperName})`
            : "plain: no chat template in the GGUF, so the messages' contents joined by blank lines, no role markers";
        const context = await model.createContext({contextSize: opts.context, threads: opts.threads, sequences: 1});
        const completion = new LlamaCompletion({contextSequence: context.getSequence()});
        entries.set(id, {id, model, context, completion, chatWrapper, promptFormat, queue: Promise.resolve()});
        process.stderr.write(`server: loaded ${id} in ${Date.now() - started} ms; prompt format: ${promptFormat}\n`);
    }
    return entries;
}

function sendJson(res, status, body, headers = {}) {
    const data = JSON.stringify(body);
    res.writeHead(status, {"Content-Type": "application/json", "Content-Length": Buffer.byteLength(data), ...headers});
    res.end(data);
}

function sendError(res, status, message, param = null) {
    sendJson(res, status, {error: {message, type: "invalid_request_error", param, code: null}});
}

async function readBody(req, cap = 4_000_000) {
    const chunks = [];
    let size = 0;
    for await (const chunk of req) {
        size += chunk.length;
        if (size > cap) throw new RequestError(413, "request body too large");
        chunks.push(chunk);
    }
    try {
        return JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
        throw new RequestError(400, "request body is not JSON");
    }
}

function logLine(opts, record) {
    if (opts.log) fs.appendFileSync(opts.log, JSON.stringify(record) + "\n");
}

async function complete(llama, opts, entries, req, res) {
    const body = await readBody(req);
    const entry = entries.get(body.model);
    if (!entry) throw new RequestError(404, `model ${JSON.stringify(body.model)} not found`, "model");
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
        throw new RequestError(400, "messages must be a non-empty array", "messages");
    }
    const {grammar, kind} = await grammarFor(llama, body.response_format);
    const maxTokens = Number.isInteger(body.max_tokens) && body.max_tokens > 0 ? body.max_tokens : opts.maxTokens;
    const prompt = promptFor(entry, body.messages);
    const stream = body.stream === true;
    const id = `chatcmpl-${crypto.randomUUID()}`;
    const created = Math.floor(Date.now() / 1000);
    const headers = {"X-Prompt-Format": entry.promptFormat};
    const abort = new AbortController();
    res.on("close", () => abort.abort());

    if (stream) {
        res.writeHead(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", ...headers});
    }
    const event = (delta, finishReason) => {
        const chunk = {id, object: "chat.completion.chunk", created, model: entry.id,
            choices: [{index: 0, delta, finish_reason: finishReason}]};
        res.write(`data: ${JSON.stringify(chunk)}\n\n`);
    };
    if (stream) event({role: "assistant", content: ""}, null);

    // One generation at a time per model: its context has one sequence.
    const run = entry.queue.then(async () => {
        const started = Date.now();
        let completionTokens = 0;
        const result = await entry.completion.generateCompletionWithMeta(prompt, {
            grammar: grammar ?? undefined,
            maxTokens,
            temperature: typeof body.temperature === "number" ? body.temperature : 0.8,
            seed: Number.isInteger(body.seed) ? body.seed : opts.seed,
            signal: abort.signal,
            stopOnAbortSignal: true,
            onToken: (tokens) => { completionTokens += tokens.length; },
            onTextChunk: stream ? (text) => event({content: text}, null) : undefined,
        });
        return {result, ms: Date.now() - started, completionTokens};
    });
    entry.queue = run.catch(() => undefined);
    const {result, ms, completionTokens} = await run;
    const finishReason = result.metadata.stopReason === "maxTokens" ? "length" : "stop";
    const promptTokens = typeof prompt === "string"
        ? entry.model.tokenize(prompt).length
        : prompt.tokenize(entry.model.tokenizer).length;
    logLine(opts, {
        model: entry.id, stream, max_tokens: maxTokens, response_format: body.response_format ?? null,
        grammar: kind, prompt_format: entry.promptFormat, finish_reason: finishReason,
        stop_reason: result.metadata.stopReason, prompt_tokens: promptTokens,
        completion_tokens: completionTokens, ms,
    });
    process.stderr.write(`server: ${entry.id}: ${kind}, ${completionTokens} tokens in ${ms} ms, ${finishReason}\n`);
    if (stream) {
        event({}, finishReason);
        res.end("data: [DONE]\n\n");
        return;
    }
    sendJson(res, 200, {
        id, object: "chat.completion", created, model: entry.id,
        choices: [{index: 0, message: {role: "assistant", content: result.response}, finish_reason: finishReason}],
        usage: {prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens},
        prompt_format: entry.promptFormat,
    }, headers);
}

async function main() {
    const opts = parseArgs(process.argv.slice(2));
    const llama = await getLlama({
        gpu: false,
        build: "never",
        usePrebuiltBinaries: true,
        skipDownload: true,
        progressLogs: false,
        logLevel: LlamaLogLevel.error,
        maxThreads: opts.threads,
    });
    const entries = await loadModels(llama, opts);
    const server = http.createServer((req, res) => {
        const url = new URL(req.url, "http://127.0.0.1");
        if (req.method === "GET" && url.pathname === "/v1/models") {
            sendJson(res, 200, {
                object: "list",
                data: [...entries.values()].map((e) => ({
                    id: e.id, object: "model", created: 0, owned_by: e.id.split("/")[0], prompt_format: e.promptFormat,
                })),
            });
            return;
        }
        if (req.method === "POST" && url.pathname === "/v1/chat/completions") {
            complete(llama, opts, entries, req, res).catch((err) => {
                if (res.headersSent) {
                    res.end();
                    return;
                }
                if (err instanceof RequestError) sendError(res, err.status, err.message, err.param);
                else sendError(res, 500, `server error: ${err.message}`);
            });
            return;
        }
        sendError(res, 404, `no route for ${req.method} ${url.pathname}`);
    });
    server.listen(opts.port, "127.0.0.1", () => {
        process.stdout.write(`listening http://127.0.0.1:${server.address().port}\n`);
    });
    const stop = () => server.close(() => process.exit(0));
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
}

main().catch((err) => {
    process.stderr.write(`server: ${err.stack ?? err}\n`);
    process.exit(1);
});
