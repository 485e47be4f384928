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
  //   CLAUDE_TEXT_PRUNE_THINKING=ignore                    leave thinking blocks where
  //                                                        they are (0.1.0; only for
  //                                                        accounts the API does not
  //                                                        check, see "Thinking" below)
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
  // Thinking. The API binds each thinking block's signature to everything before
  // it when it was produced; a later request with different content before the
  // block is rejected (HTTP 400) or loses the block. Leaving blocks out is
  // accepted only as a run from the front, and a tool round in progress must go
  // back with its thinking. So when an assistant message holds a thinking or
  // redacted_thinking block (and THINKING is not "ignore"):
  //   - the prune of a request messages[0:k] is the rule above applied to that
  //     prefix; its "edit end" is 1 + the last message it shortens (0: none);
  //   - the request that produced an assistant message is the prefix before the
  //     first message of its reply (same message.id);
  //   - the edit end in force at request k is that of the last free request point
  //     <= k (a point after a message that is not an assistant record, with no
  //     tool_result since the last assistant record), never earlier than the
  //     request that produced the first thinking block (requests before it were
  //     pruned by the plain rule, on the whole list);
  //   - this request shortens the messages before its edit end in force, and
  //     leaves out every thinking block whose producing request had a smaller
  //     one (a run from the front: the edit end only grows); a message left with
  //     no block is left out. The round in progress shares this request's edit end,
  //     so its thinking always goes back. Within a round Claude Code feeds the
  //     pruned list back in: it is a fixed point of this rule;
  //   - settled: leaving thinking out can change what the rule says of the result
  //     (the block that pinned the edit end is gone), so while a pass leaves
  //     thinking out the rule is applied again to its own result, unless no message
  //     from its edit end to the whole list's cutoff shortens (then a second pass
  //     changes nothing). Pruning a pruned list gives back that very array.
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

  // Append one line to a log file without ever blocking, throwing or printing.
  // The pattern, for any log an injected snippet writes:
  //   1. fs from process.getBuiltinModule("fs") (Node >= 20.16 / 22.3, ESM and
  //      CJS), else from require (CommonJS), else from import("node:fs") made
  //      through Function (ESM on older Node has no require; Function keeps the
  //      snippet plain ES2017 for parsers that do not know import()).
  //   2. Asynchronous calls only: stat, and refuse anything that is not a
  //      regular file (a FIFO, a device, a directory); open with O_NONBLOCK, so a
  //      FIFO swapped in after the stat cannot block either; fstat the descriptor
  //      and write only to a regular file; close.
  //   3. Every callback swallows its error; nothing waits for the write.
  function appendLine(file, line) {
    function ignore() {}
    function write(fs) {
      var c = fs.constants || {};
      var flags = c.O_APPEND ? c.O_WRONLY | c.O_APPEND | c.O_CREAT | (c.O_NONBLOCK | 0) : "a";
      fs.stat(file, function (statError, stats) {
        if (!statError && !stats.isFile()) return;
        fs.open(file, flags, function (openError, fd) {
          if (openError) return;
          fs.fstat(fd, function (fstatError, opened) {
            if (fstatError || !opened.isFile()) return fs.close(fd, ignore);
            fs.write(fd, line, function () {
              fs.close(fd, ignore);
            });
          });
        });
      });
    }
    function guarded(fs) {
      try {
        write(fs);
      } catch (e) {
        // logging must never break a request
      }
    }
    try {
      if (typeof process.getBuiltinModule === "function") {
        guarded(process.getBuiltinModule("fs"));
      } else if (typeof require === "function") {
        guarded(require("fs"));
      } else {
        new Function("return import('node:fs')")().then(function (fs) {
          guarded(fs.default || fs);
        }, ignore);
      }
    } catch (e) {
      // logging must never break a request
    }
  }

  // The shortened copy of an older message and how many texts it shortened, or
  // null when the message stays as it is.
  function prunedMessage(msg, maxChars) {
    if (!isObject(msg) || (msg.type !== "user" && msg.type !== "assistant")) return null;
    if (msg.isMeta || msg.isCompactSummary || !isObject(msg.message)) return null;
    var content = msg.message.content;
    var newContent = null;
    var count = 0;
    if (typeof content === "string") {
      if (msg.type !== "user") return null; // assistant strings stay
      var text = prunedText(content, maxChars);
      if (text === content) return null;
      newContent = text;
      count = 1;
    } else if (Array.isArray(content)) {
      for (var b = 0; b < content.length; b++) {
        var block = content[b];
        if (blockType(block) !== "text" || typeof block.text !== "string") continue;
        var shortened = prunedText(block.text, maxChars);
        if (shortened === block.text) continue;
        if (newContent === null) newContent = content.slice();
        newContent[b] = Object.assign({}, block, { text: shortened });
        count++;
      }
      if (newContent === null) return null;
    } else {
      return null;
    }
    var copy = Object.assign({}, msg, {
      message: Object.assign({}, msg.message, { content: newContent }),
    });
    return { message: copy, blocks: count };
  }

  // The plain rule: shorten the messages before the cutoff (null: nothing changes).
  function pruneText(messages, starts, s) {
    var prunableTurns = Math.floor((starts.length - s.keep) / s.step) * s.step;
    if (prunableTurns <= 0) return null;
    var cutoff = starts[prunableTurns];
    // Build the pruned copy lazily: nothing is allocated until a message changes.
    var out = null;
    var blocksPruned = 0;
    var messagesChanged = 0;
    for (var m = 0; m < cutoff; m++) {
      var pruned = prunedMessage(messages[m], s.maxChars);
      if (pruned === null) continue;
      if (out === null) out = messages.slice();
      out[m] = pruned.message;
      blocksPruned += pruned.blocks;
      messagesChanged++;
    }
    if (out === null) return null;
    // Only now estimate the size (the expensive part), stopping at the threshold.
    if (s.threshold > 0 && estimateTokens(messages, s.threshold) < s.threshold) return null;
    return {
      out: out,
      cutoff: cutoff,
      messagesChanged: messagesChanged,
      blocksPruned: blocksPruned,
    };
  }

  function isThinking(block) {
    var type = blockType(block);
    return type === "thinking" || type === "redacted_thinking";
  }

  function contentList(msg, kind) {
    if (!isObject(msg) || msg.type !== kind || !isObject(msg.message)) return null;
    var content = msg.message.content;
    return Array.isArray(content) ? content : null;
  }

  function hasThinking(msg) {
    var content = contentList(msg, "assistant");
    if (content === null) return false;
    for (var i = 0; i < content.length; i++) {
      if (isThinking(content[i])) return true;
    }
    return false;
  }

  function carriesToolResult(msg) {
    var content = contentList(msg, "user");
    if (content === null) return false;
    for (var i = 0; i < content.length; i++) {
      if (blockType(content[i]) === "tool_result") return true;
    }
    return false;
  }

  // The rule when thinking blocks are present (see "Thinking" above).
  function pruneKeepingThinking(messages, starts, s) {
    var n = messages.length;
    var turnsBefore = [0]; // turn starts in messages[0:k]
    var tokensBefore = [0]; // rough (unscaled) estimate of messages[0:k]
    var lastChanged = [-1]; // the last index < k that the prune would shorten
    var lastFree = [0]; // the last free request point <= k
    var firstOfId = new Map();
    var producedBy = []; // [index of a thinking message, its producing request]
    var turns = 0;
    var openRound = false;
    for (var i = 0; i < n; i++) {
      var msg = messages[i];
      if (isTurnStart(msg)) turns++;
      turnsBefore.push(turns);
      tokensBefore.push(tokensBefore[i] + messageTokens(msg));
      lastChanged.push(prunedMessage(msg, s.maxChars) !== null ? i : lastChanged[i]);
      var isAssistant = isObject(msg) && msg.type === "assistant";
      if (isAssistant) {
        openRound = false;
        var id = isObject(msg.message) ? msg.message.id : undefined;
        var start = i;
        if (typeof id === "string") {
          if (firstOfId.has(id)) start = firstOfId.get(id);
          else firstOfId.set(id, i);
        }
        if (hasThinking(msg)) producedBy.push([i, start]);
      } else if (carriesToolResult(msg)) {
        openRound = true;
      }
      lastFree.push(openRound || isAssistant ? lastFree[i] : i + 1);
    }

    // The prune of the request messages[0:k]: its edit end and cutoff.
    function editEnd(k) {
      var count = turnsBefore[k];
      if (count <= s.keep) return { end: 0, cutoff: null };
      var prunable = Math.floor((count - s.keep) / s.step) * s.step;
      if (prunable === 0) return { end: 0, cutoff: null };
      var cutoff = starts[prunable];
      if (lastChanged[cutoff] < 0) return { end: 0, cutoff: cutoff };
      var estimate = Math.ceil(tokensBefore[k] * TOKENS_PER_ESTIMATE);
      if (s.threshold > 0 && estimate < s.threshold) return { end: 0, cutoff: cutoff };
      return { end: lastChanged[cutoff] + 1, cutoff: cutoff };
    }

    var first = producedBy[0][1];
    for (var p = 1; p < producedBy.length; p++) first = Math.min(first, producedBy[p][1]);
    function inForce(k) {
      return editEnd(k <= first ? k : Math.max(first, lastFree[k]));
    }

    var now = inForce(n);
    if (now.end === 0) return null;
    var drop = new Set();
    for (var d = 0; d < producedBy.length; d++) {
      if (inForce(producedBy[d][1]).end < now.end) drop.add(producedBy[d][0]);
    }
    var out = [];
    var messagesChanged = 0;
    var blocksPruned = 0;
    var thinkingDropped = 0;
    var messagesRemoved = 0;
    for (var m = 0; m < n; m++) {
      var next = messages[m];
      if (m < now.end) {
        var pruned = prunedMessage(next, s.maxChars);
        if (pruned !== null) {
          next = pruned.message;
          blocksPruned += pruned.blocks;
        }
      }
      if (drop.has(m)) {
        var content = next.message.content;
        var kept = [];
        for (var b = 0; b < content.length; b++) {
          if (!isThinking(content[b])) kept.push(content[b]);
        }
        thinkingDropped += content.length - kept.length;
        if (kept.length === 0) {
          messagesRemoved++;
          continue;
        }
        next = Object.assign({}, next, {
          message: Object.assign({}, next.message, { content: kept }),
        });
      }
      if (next !== messages[m]) messagesChanged++;
      out.push(next);
    }
    // A second pass changes nothing when no message from the edit end to the whole list's
    // cutoff shortens (its cutoff is at most that one; before the edit end nothing shortens
    // again): then the result is settled already.
    var whole = editEnd(n).cutoff;
    return {
      out: out,
      cutoff: now.cutoff,
      editEnd: now.end,
      messagesChanged: messagesChanged,
      blocksPruned: blocksPruned,
      thinkingDropped: thinkingDropped,
      messagesRemoved: messagesRemoved,
      unsettled: thinkingDropped > 0 && whole !== null && lastChanged[whole] >= now.end,
    };
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

    var settings = { keep: keep, threshold: threshold, maxChars: maxChars, step: step };
    // One pass of the rule over list (null: nothing changes).
    var pass = function (list) {
      var starts = [];
      var thinking = false;
      for (var i = 0; i < list.length; i++) {
        if (isTurnStart(list[i])) starts.push(i);
        if (!thinking && hasThinking(list[i])) thinking = true;
      }
      if (starts.length <= keep) return null;
      var withThinking = thinking && env.CLAUDE_TEXT_PRUNE_THINKING !== "ignore";
      var found = withThinking
        ? pruneKeepingThinking(list, starts, settings)
        : pruneText(list, starts, settings);
      if (found !== null) {
        found.turns = starts.length;
        found.keepThinking = withThinking;
        if (!withThinking) {
          found.editEnd = found.cutoff;
          found.thinkingDropped = found.messagesRemoved = 0;
          found.unsettled = false;
        }
      }
      return found;
    };
    var result = pass(messages);
    if (result === null) return messages;
    var turnCount = result.turns;
    var keepThinking = result.keepThinking;
    // Settled (see "Thinking"): while a pass leaves thinking out and may not be a fixed point,
    // the rule is applied again to its own result (each further pass empties a thinking
    // message: as many as it holds at most).
    var last = result;
    var passes = result.out.length;
    for (var again = 0; again <= passes && last.unsettled; again++) {
      var next = pass(last.out);
      if (next === null) break;
      result = {
        out: next.out,
        cutoff: next.cutoff,
        editEnd: next.editEnd,
        messagesChanged: result.messagesChanged + next.messagesChanged,
        blocksPruned: result.blocksPruned + next.blocksPruned,
        thinkingDropped: result.thinkingDropped + next.thinkingDropped,
        messagesRemoved: result.messagesRemoved + next.messagesRemoved,
      };
      last = next;
    }

    var debugFile = env.CLAUDE_TEXT_PRUNE_DEBUG;
    if (typeof debugFile === "string" && debugFile !== "") {
      var entry = {
        event: "ctxpatch.textPrune",
        time: new Date().toISOString(),
        messages: messages.length,
        turns: turnCount,
        keep: keep,
        step: step,
        maxChars: maxChars,
        threshold: threshold,
        thinking: keepThinking ? "drop" : "ignore",
        cutoff: result.cutoff,
        editEnd: result.editEnd,
        messagesChanged: result.messagesChanged,
        blocksPruned: result.blocksPruned,
        thinkingDropped: result.thinkingDropped,
        messagesRemoved: result.messagesRemoved,
        tokensBefore: estimateTokens(messages, Infinity),
        tokensAfter: estimateTokens(result.out, Infinity),
      };
      appendLine(debugFile, JSON.stringify(entry) + "\n");
    }
    return result.out;
  } catch (e) {
    return messages;
  }
}
