// FROZEN: the text-prune snippet of ctxpatch 0.1.0, byte for byte (below this header).
//
// Why frozen: 0.1.0 is a released version, and the files it patched must stay readable and
// upgradable whatever the current snippet becomes (tests/patcher/test_upgrade.py rebuilds what
// 0.1.0 wrote from it and checks the sha256 of the result against what 0.1.0 really wrote;
// tests/patcher/test_ops.py upgrades a file holding it). It is the only copy of a 0.1.0
// artifact in the repository: the tests used to take 0.1.0 out of git history (commit
// 2177146), which a shallow clone does not have. Never edit it or make it follow
// patcher/snippets/text_prune.js; tests/conftest.py:snippet_010 drops this header.

function _aggressiveTextPrune(messages) {
  // ctxpatch: shorten the text of old conversation turns before each API request.
  //
  // Injected by ctxpatch right after the micro-compaction call of the query loop.
  // Plain ES2017, no dependencies. Its Python twin is engine/textprune.py; the
  // two are checked against each other by tests/differential.
  //
  // Settings, read from process.env on every call (a valid value is 1 to 9
  // ASCII digits, nothing else, and at least the minimum; anything else means
  // the default):
  //   CLAUDE_TEXT_PRUNE_KEEP       (default 4, min 1)      recent turns kept intact
  //   CLAUDE_TEXT_PRUNE_THRESHOLD  (default 20000, min 0)  do nothing below this
  //                                                        many estimated tokens
  //   CLAUDE_TEXT_PRUNE_MAX_CHARS  (default 80, min 1)     longest text kept as is
  //   CLAUDE_TEXT_PRUNE_STEP       (default 4, min 1)      the cutoff moves by this
  //                                                        many turns at a time
  //   CLAUDE_TEXT_PRUNE_DISABLE=1                          off
  //   CLAUDE_TEXT_PRUNE_DEBUG=FILE                         append one JSON line per
  //                                                        call that pruned something
  //
  // A turn starts at a message a person typed: type "user", not isMeta, not
  // isCompactSummary, with string content or with at least one block that is not
  // a tool_result. With n turn starts, P = floor((n - KEEP) / STEP) * STEP; when
  // P > 0 every message before the P-th turn start (0-based) is "older".
  //
  // In older user/assistant messages (never isMeta, never compact summaries), a
  // text block longer than MAX_CHARS becomes its first line, cut to MAX_CHARS
  // UTF-16 units (never between the two halves of a surrogate pair), followed by
  // "\n[earlier context pruned]", when that is shorter than the text (a text only
  // a few units over MAX_CHARS is left as is, never made longer). The string
  // content of an older typed user message is shortened the same way. Nothing
  // else is ever touched.
  //
  // The input is never mutated: changed messages are new objects, everything
  // else is shared, and the very same array comes back when nothing changed.
  // Any error returns the input unchanged; nothing is written to stdout/stderr.
  var MARKER = "\n[earlier context pruned]";
  var TOKENS_PER_ESTIMATE = 1.3333333333333333;

  function isObject(value) {
    return value !== null && typeof value === "object";
  }

  function blockType(block) {
    return isObject(block) ? block.type : undefined;
  }

  function quarter(length) {
    return Math.round(length / 4);
  }

  function stringLength(value) {
    return typeof value === "string" ? value.length : 0;
  }

  function setting(env, name, fallback, min) {
    var raw = env[name];
    if (typeof raw !== "string" || !/^[0-9]{1,9}$/.test(raw)) return fallback;
    var value = parseInt(raw, 10);
    return value >= min ? value : fallback;
  }

  // A user message a person typed (not a tool_result carrier, not meta, not a summary).
  function isTurnStart(msg) {
    if (!isObject(msg) || msg.type !== "user" || msg.isMeta || msg.isCompactSummary) return false;
    if (!isObject(msg.message)) return false;
    var content = msg.message.content;
    if (typeof content === "string") return true;
    if (!Array.isArray(content)) return false;
    for (var i = 0; i < content.length; i++) {
      if (blockType(content[i]) !== "tool_result") return true;
    }
    return false;
  }

  function toolResultTokens(content) {
    if (typeof content === "string") return quarter(content.length);
    if (!Array.isArray(content)) return 0;
    var sum = 0;
    for (var i = 0; i < content.length; i++) {
      var type = blockType(content[i]);
      if (type === "text") sum += quarter(stringLength(content[i].text));
      else if (type === "image" || type === "document") sum += 2000;
    }
    return sum;
  }

  function blockTokens(block) {
    switch (blockType(block)) {
      case "text":
        return quarter(stringLength(block.text));
      case "thinking":
        return quarter(stringLength(block.thinking));
      case "image":
      case "document":
        return 2000;
      case "tool_result":
        return toolResultTokens(block.content);
      default: {
        var json = JSON.stringify(block);
        return quarter(typeof json === "string" ? json.length : 0);
      }
    }
  }

  function messageTokens(msg) {
    if (!isObject(msg) || (msg.type !== "user" && msg.type !== "assistant")) return 0;
    if (!isObject(msg.message)) return 0;
    var content = msg.message.content;
    if (typeof content === "string") return quarter(content.length);
    if (!Array.isArray(content)) return 0;
    var sum = 0;
    for (var i = 0; i < content.length; i++) sum += blockTokens(content[i]);
    return sum;
  }

  // Claude Code's rough estimate. Stops early once the result reaches `enough`
  // (the sum only grows), so the threshold check rarely walks the whole array.
  function estimateTokens(list, enough) {
    var sum = 0;
    for (var i = 0; i < list.length; i++) {
      sum += messageTokens(list[i]);
      if (Math.ceil(sum * TOKENS_PER_ESTIMATE) >= enough) break;
    }
    return Math.ceil(sum * TOKENS_PER_ESTIMATE);
  }

  // The shortened text, or the text itself when it is short enough or when
  // shortening would not make it shorter (first line + marker >= the text).
  // Only looks at the first maxChars + 1 code units.
  function prunedText(text, maxChars) {
    if (text.length <= maxChars) return text;
    var end = 0;
    while (end < text.length && end <= maxChars) {
      var unit = text.charCodeAt(end);
      if (unit === 10 || unit === 13) break;
      end++;
    }
    if (end > maxChars) {
      end = maxChars;
      var high = text.charCodeAt(end - 1);
      var low = text.charCodeAt(end);
      if (high >= 0xd800 && high <= 0xdbff && low >= 0xdc00 && low <= 0xdfff) end--;
    }
    var result = text.slice(0, end) + MARKER;
    return result.length < text.length ? result : text;
  }

  function writeDebugLine(file, entry) {
    try {
      var fs = null;
      if (typeof process.getBuiltinModule === "function") fs = process.getBuiltinModule("fs");
      else if (typeof require === "function") fs = require("fs");
      if (fs) fs.appendFileSync(file, JSON.stringify(entry) + "\n");
    } catch (e) {
      // debugging must never break a request
    }
  }

  try {
    if (!Array.isArray(messages) || typeof process === "undefined" || !isObject(process.env)) {
      return messages;
    }
    var env = process.env;
    if (env.CLAUDE_TEXT_PRUNE_DISABLE === "1") return messages;
    var keep = setting(env, "CLAUDE_TEXT_PRUNE_KEEP", 4, 1);
    var threshold = setting(env, "CLAUDE_TEXT_PRUNE_THRESHOLD", 20000, 0);
    var maxChars = setting(env, "CLAUDE_TEXT_PRUNE_MAX_CHARS", 80, 1);
    var step = setting(env, "CLAUDE_TEXT_PRUNE_STEP", 4, 1);

    // 1. Count turns (cheap) and find the cutoff.
    var turnStarts = [];
    for (var i = 0; i < messages.length; i++) {
      if (isTurnStart(messages[i])) turnStarts.push(i);
    }
    var prunableTurns = Math.floor((turnStarts.length - keep) / step) * step;
    if (prunableTurns <= 0) return messages;
    var cutoff = turnStarts[prunableTurns];

    // 2. Build the pruned copy lazily: nothing is allocated until a block changes.
    var out = null;
    var blocksPruned = 0;
    var messagesChanged = 0;
    for (var m = 0; m < cutoff; m++) {
      var msg = messages[m];
      if (!isObject(msg) || (msg.type !== "user" && msg.type !== "assistant")) continue;
      if (msg.isMeta || msg.isCompactSummary || !isObject(msg.message)) continue;
      var content = msg.message.content;
      var newContent = null;
      if (typeof content === "string") {
        if (msg.type !== "user") continue; // assistant strings stay
        var text = prunedText(content, maxChars);
        if (text === content) continue;
        newContent = text;
        blocksPruned++;
      } else if (Array.isArray(content)) {
        for (var b = 0; b < content.length; b++) {
          var block = content[b];
          if (blockType(block) !== "text" || typeof block.text !== "string") continue;
          var shortened = prunedText(block.text, maxChars);
          if (shortened === block.text) continue;
          if (newContent === null) newContent = content.slice();
          newContent[b] = Object.assign({}, block, { text: shortened });
          blocksPruned++;
        }
        if (newContent === null) continue;
      } else {
        continue;
      }
      if (out === null) out = messages.slice();
      out[m] = Object.assign({}, msg, {
        message: Object.assign({}, msg.message, { content: newContent }),
      });
      messagesChanged++;
    }
    if (out === null) return messages;

    // 3. Only now estimate the size (the expensive part), stopping at the threshold.
    if (threshold > 0 && estimateTokens(messages, threshold) < threshold) return messages;

    var debugFile = env.CLAUDE_TEXT_PRUNE_DEBUG;
    if (typeof debugFile === "string" && debugFile !== "") {
      writeDebugLine(debugFile, {
        event: "ctxpatch.textPrune",
        time: new Date().toISOString(),
        messages: messages.length,
        turns: turnStarts.length,
        keep: keep,
        step: step,
        maxChars: maxChars,
        threshold: threshold,
        cutoff: cutoff,
        messagesChanged: messagesChanged,
        blocksPruned: blocksPruned,
        tokensBefore: estimateTokens(messages, Infinity),
        tokensAfter: estimateTokens(out, Infinity),
      });
    }
    return out;
  } catch (e) {
    return messages;
  }
}
